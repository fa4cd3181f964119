"""Tensor-pair accuracy metrics that reproduce msprobe's compare numbers, plus its per-dtype verdict.

`compare_tensors(test, reference)` answers "how far is the tensor under test (the NPU side, msprobe's
"NPU") from the reference (a CPU float32 run or a GPU golden, msprobe's "Bench")?" with the columns of
`msprobe compare` (mindstudio-probe 26.2.0, `msprobe/core/compare/algorithm/builtin_algorithm/`) and a
pass / warning / error verdict following msprobe's API accuracy checker
(`msprobe/pytorch/api_accuracy_checker/compare/compare.py::_compare_float_tensor`).

Definitions (each one is msprobe's, read from its source; deviations are named):

- Cosine: dot(t, r) / (|t| * |r|) in float64 over the flattened tensors. Both norms <= float64 eps (both
  all-zero): 1.0. Exactly one all-zero side: NaN (undefined; msprobe writes "Nan"). A single element
  or an empty tensor: NaN (msprobe: "unsupported"). msprobe rounds values above 0.9999 to 6 decimals
  for its CSV; we keep full precision (compare with `msprobe_rounded_cosine`).
- EucDist: the L2 norm of (t - r) in float64. RMSE (not an msprobe column): EucDist / sqrt(numel).
- MaxAbsErr: max |t - r| in float64.
- MaxRelativeErr, One Thousandth / Five Thousandths Err Ratio: relative error |(t - r) / r| computed in
  float32 when both tensors are 32-bit-or-narrower floats (msprobe reads bf16 dumps as float32 and uses
  numpy's result type with float32), else float64. Where the reference is exactly 0, msprobe adds that
  float type's eps to *both* sides before dividing, so 0 vs 0 gives 0 and t vs 0 gives ~|t| / eps (a
  huge number that makes MaxRelativeErr explode next to zeros: that is msprobe's behaviour and we keep
  it). The ratios are the share of elements with relative error strictly below 0.001 / 0.005: higher is
  better, 1.0 is perfect.
- NaN / Inf: when both tensors have NaN at exactly the same positions and Inf (either sign) at exactly
  the same positions, those positions count as agreeing: they are set to 0 on both sides and every
  metric is computed as usual. When the positions differ, every metric is NaN (msprobe: "Nan") and the
  verdict is error. Counts and the first position (an index tuple into the shape) are reported for each
  side either way.

Verdict (msprobe's API checker; the *test* tensor's dtype picks the rule):
  1. cosine <= 0.99 -> error (skipped for one-element tensors; both all-zero counts as 1.0);
  2. MaxAbsErr < 0.001 -> pass;
  3. float16 / bfloat16: share of checker relative error < 0.01 must exceed 0.99, else error; share
     < 0.001 must exceed 0.999, else warning; else pass.
     float32 / float64 (one order stricter): share < 0.001 must exceed 0.999, else error; share < 0.0001
     must exceed 0.9999, else warning; else pass.
  The checker's relative error is |t - r| / (|r| + eps) with eps = 2**-8 for bfloat16 (msprobe's
  BFLOAT16_EPS) and the dtype's machine eps otherwise, so zeros in the reference do not explode it.
  Integer and bool tensors: pass only when equal everywhere (msprobe's binary comparison).

Tensors are consumed in flat chunks so that temporaries stay a small fraction of one tensor: comparing
two 25 MB logits tensors costs ~4 MB of scratch, not another 100 MB of float64 copies. The chunk loop is
latency-bound, so it runs with torch's intra-op threads pinned to 1 (`serial_torch`): on a loaded 2-core
machine two threads turned a 0.3 s compare of 6.3 M elements into 17 s of synchronisation.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import numpy as np
import torch

from workbench.errors import WorkbenchError
from workbench.results.verdict import Verdict

# Elements per chunk: float64 temporaries of this length are 512 KiB each.
CHUNK_ELEMENTS = 1 << 16

BFLOAT16_CHECKER_EPS = 2.0**-8  # msprobe CompareConst.BFLOAT16_EPS
COSINE_ERROR_THRESHOLD = 0.99  # msprobe: cosine must exceed this, else error
MAX_ABS_PASS_THRESHOLD = 0.001  # msprobe: max abs error below this passes outright
_FLOAT64_EPS = float(np.finfo(np.float64).eps)  # msprobe Const.FLOAT_EPSILON, the all-zero test

_HALF_DTYPES = {torch.float16, torch.bfloat16}
for _name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"):
    if hasattr(torch, _name):
        _HALF_DTYPES.add(getattr(torch, _name))
_HALF_DTYPES = frozenset(_HALF_DTYPES)


@dataclass(frozen=True)
class NonFinite:
    """NaN / Inf census of one tensor; first positions are index tuples into its shape (None if absent)."""

    nan_count: int
    inf_count: int
    first_nan: tuple[int, ...] | None
    first_inf: tuple[int, ...] | None

    @property
    def any(self) -> bool:
        return self.nan_count > 0 or self.inf_count > 0


@dataclass(frozen=True)
class VerdictRule:
    """The thresholds one dtype is judged by: `error_share` must exceed 1 - error_threshold, etc."""

    name: str  # "half", "single" or "exact"
    error_threshold: float  # relative-error bound whose share decides error
    warning_threshold: float  # relative-error bound whose share decides warning


HALF_RULE = VerdictRule("half", error_threshold=0.01, warning_threshold=0.001)
SINGLE_RULE = VerdictRule("single", error_threshold=0.001, warning_threshold=0.0001)
EXACT_RULE = VerdictRule("exact", error_threshold=0.0, warning_threshold=0.0)


def verdict_rule(dtype: torch.dtype) -> VerdictRule:
    """The rule msprobe applies to a tensor of `dtype` (the test side's)."""
    if dtype in _HALF_DTYPES:
        return HALF_RULE
    if dtype.is_floating_point:
        return SINGLE_RULE
    return EXACT_RULE


def checker_eps(dtype: torch.dtype) -> float:
    """The eps msprobe's checker adds to |reference| in the relative-error denominator."""
    if dtype == torch.bfloat16:
        return BFLOAT16_CHECKER_EPS
    if dtype.is_floating_point:
        return float(torch.finfo(dtype).eps)
    return float(np.finfo(np.float64).eps)


@dataclass(frozen=True)
class TensorComparison:
    """msprobe's compare columns for one tensor pair, plus RMSE, NaN/Inf census and the verdict.

    Metrics are NaN where undefined (see the module docstring). `error_share` / `warning_share` are the
    checker's shares that decided the verdict (relative error below the rule's two thresholds).
    """

    test_dtype: str
    reference_dtype: str
    shape: tuple[int, ...]
    numel: int
    cosine: float
    euclidean_distance: float
    rmse: float
    max_abs_err: float
    max_rel_err: float
    one_thousandth_ratio: float
    five_thousandth_ratio: float
    test_nonfinite: NonFinite
    reference_nonfinite: NonFinite
    nonfinite_positions_match: bool
    error_share: float
    warning_share: float
    verdict: Verdict
    verdict_reason: str

    @property
    def msprobe_rounded_cosine(self) -> float:
        """Cosine as msprobe prints it: rounded to 6 decimals when above 0.9999."""
        if math.isnan(self.cosine) or self.cosine <= 0.9999:
            return self.cosine
        return round(self.cosine, 6)

    def to_dict(self) -> dict:
        """Flat JSON-ready dict (NaN stays float NaN; the dump JSON export turns it into null)."""
        row = asdict(self)
        row["verdict"] = self.verdict.value
        row["shape"] = list(self.shape)
        for side in ("test", "reference"):
            census = row.pop(f"{side}_nonfinite")
            row[f"{side}_nan_count"] = census["nan_count"]
            row[f"{side}_inf_count"] = census["inf_count"]
            row[f"{side}_first_nan"] = list(census["first_nan"]) if census["first_nan"] is not None else None
            row[f"{side}_first_inf"] = list(census["first_inf"]) if census["first_inf"] is not None else None
        return row


@contextlib.contextmanager
def serial_torch() -> Iterator[None]:
    """Run the enclosed torch ops on one intra-op thread, restoring the previous count afterwards.

    torch's thread count is process-wide, so other threads of this process also run serially meanwhile;
    nested uses are no-ops.
    """
    previous = torch.get_num_threads()
    if previous == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _as_tensor(value: torch.Tensor | np.ndarray, role: str) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(value))
    raise WorkbenchError(
        f"compare_tensors: the {role} must be a torch.Tensor or numpy array, got {type(value).__name__}"
    )


def _relative_error_dtype(test: torch.dtype, reference: torch.dtype) -> torch.dtype:
    """float32 when both are floats of <= 32 bits (msprobe: numpy result type with float32), else float64."""
    narrow = all(d.is_floating_point and torch.finfo(d).bits <= 32 for d in (test, reference))
    return torch.float32 if narrow else torch.float64


class _Census:
    """Running NaN / Inf counts and first flat positions of one side."""

    def __init__(self) -> None:
        self.nan_count = 0
        self.inf_count = 0
        self.first_nan: int | None = None
        self.first_inf: int | None = None

    def add(self, nan: torch.Tensor, inf: torch.Tensor, offset: int) -> None:
        n_nan, n_inf = int(nan.sum()), int(inf.sum())
        if n_nan and self.first_nan is None:
            self.first_nan = offset + int(nan.nonzero()[0, 0])
        if n_inf and self.first_inf is None:
            self.first_inf = offset + int(inf.nonzero()[0, 0])
        self.nan_count += n_nan
        self.inf_count += n_inf

    def result(self, shape: tuple[int, ...]) -> NonFinite:
        def unravel(flat: int | None) -> tuple[int, ...] | None:
            if flat is None:
                return None
            return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()

        return NonFinite(self.nan_count, self.inf_count, unravel(self.first_nan), unravel(self.first_inf))


class _Sums:
    """Running sums over chunks; every msprobe metric decomposes into these."""

    def __init__(self, rule: VerdictRule) -> None:
        self.rule = rule
        self.dot = 0.0
        self.test_sq = 0.0
        self.ref_sq = 0.0
        self.diff_sq = 0.0
        self.max_abs = 0.0
        self.max_rel = 0.0
        self.under_one_thousandth = 0
        self.under_five_thousandths = 0
        self.under_error = 0
        self.under_warning = 0
        self.unequal = 0

    def add(self, t: torch.Tensor, r: torch.Tensor, rel_dtype: torch.dtype, eps_checker: float) -> None:
        # t, r: [chunk] float64, non-finite positions already zeroed
        diff = t - r
        self.dot += float(torch.dot(t, r))
        self.test_sq += float(torch.dot(t, t))
        self.ref_sq += float(torch.dot(r, r))
        self.diff_sq += float(torch.dot(diff, diff))
        abs_diff = diff.abs_()
        self.max_abs = max(self.max_abs, float(abs_diff.max()))
        self.unequal += int((abs_diff != 0).sum())

        # msprobe compare's relative error: eps added to both sides where the reference is 0.
        tn, rn = t.to(rel_dtype), r.to(rel_dtype)
        zero = rn == 0
        if bool(zero.any()):
            eps = torch.finfo(rel_dtype).eps
            tn = torch.where(zero, tn + eps, tn)
            rn = torch.where(zero, rn + eps, rn)
        rel = ((tn - rn) / rn).abs_()
        self.max_rel = max(self.max_rel, float(rel.max()))
        self.under_one_thousandth += int((rel < 0.001).sum())
        self.under_five_thousandths += int((rel < 0.005).sum())

        # msprobe checker's relative error: |t - r| / (|r| + eps_dtype).
        checker_rel = abs_diff.div_(r.abs().add_(eps_checker))
        self.under_error += int((checker_rel < self.rule.error_threshold).sum())
        self.under_warning += int((checker_rel < self.rule.warning_threshold).sum())


def _cosine(sums: _Sums, numel: int) -> float:
    if numel <= 1:
        return math.nan
    test_norm, ref_norm = math.sqrt(sums.test_sq), math.sqrt(sums.ref_sq)
    if test_norm <= _FLOAT64_EPS and ref_norm <= _FLOAT64_EPS:
        return 1.0
    if test_norm <= _FLOAT64_EPS or ref_norm <= _FLOAT64_EPS:
        return math.nan
    return sums.dot / (test_norm * ref_norm)


def _judge(rule: VerdictRule, cosine: float, numel: int, sums: _Sums) -> tuple[Verdict, str, float, float]:
    """msprobe checker's decision order; returns verdict, reason and the two shares it looked at."""
    if numel == 0:
        return Verdict.PASS, "empty tensors", math.nan, math.nan
    error_share = sums.under_error / numel
    warning_share = sums.under_warning / numel
    if rule is EXACT_RULE:
        if sums.unequal:
            return (
                Verdict.ERROR,
                f"{sums.unequal} of {numel} elements differ (integer/bool tensors must be equal)",
                1.0,
                1.0,
            )
        return Verdict.PASS, "equal everywhere", 1.0, 1.0
    if numel > 1 and not cosine > COSINE_ERROR_THRESHOLD and not (sums.test_sq == 0 and sums.ref_sq == 0):
        return Verdict.ERROR, f"cosine {cosine:.6g} <= {COSINE_ERROR_THRESHOLD}", error_share, warning_share
    if sums.max_abs < MAX_ABS_PASS_THRESHOLD:
        return Verdict.PASS, f"max abs error {sums.max_abs:.3g} < {MAX_ABS_PASS_THRESHOLD}", error_share, warning_share
    if error_share <= 1 - rule.error_threshold:
        reason = (
            f"share of relative error < {rule.error_threshold} is {error_share:.6f}, "
            f"needs > {1 - rule.error_threshold:g} ({rule.name} rule)"
        )
        return Verdict.ERROR, reason, error_share, warning_share
    if warning_share <= 1 - rule.warning_threshold:
        reason = (
            f"share of relative error < {rule.warning_threshold} is {warning_share:.6f}, "
            f"needs > {1 - rule.warning_threshold:g} ({rule.name} rule)"
        )
        return Verdict.WARNING, reason, error_share, warning_share
    return Verdict.PASS, f"relative-error shares within the {rule.name} rule", error_share, warning_share


def compare_tensors(test: torch.Tensor | np.ndarray, reference: torch.Tensor | np.ndarray) -> TensorComparison:
    """Compare `test` (e.g. the NPU output) with `reference` (e.g. CPU float32) the way msprobe does.

    Shapes must match exactly; dtypes may differ (bf16 vs fp32 is the usual case). See the module
    docstring for every definition.
    """
    t_all, r_all = _as_tensor(test, "test tensor"), _as_tensor(reference, "reference tensor")
    if tuple(t_all.shape) != tuple(r_all.shape):
        raise WorkbenchError(
            f"compare_tensors: shapes differ (test {list(t_all.shape)} vs reference {list(r_all.shape)}); "
            "compare outputs of the same module for the same inputs"
        )
    shape = tuple(int(s) for s in t_all.shape)
    rule = verdict_rule(t_all.dtype)
    rel_dtype = _relative_error_dtype(t_all.dtype, r_all.dtype)
    eps_checker = checker_eps(t_all.dtype)
    t_flat = t_all.reshape(-1)  # [numel] (a view when contiguous)
    r_flat = r_all.reshape(-1)
    numel = t_flat.numel()

    with serial_torch():
        sums, t_census, r_census, positions_match = _accumulate(t_flat, r_flat, rule, rel_dtype, eps_checker)
    return _result(t_all, r_all, shape, numel, rule, sums, t_census, r_census, positions_match)


def _accumulate(
    t_flat: torch.Tensor, r_flat: torch.Tensor, rule: VerdictRule, rel_dtype: torch.dtype, eps_checker: float
) -> tuple[_Sums, _Census, _Census, bool]:
    """One pass over both flat tensors, chunk by chunk."""
    sums, t_census, r_census = _Sums(rule), _Census(), _Census()
    positions_match = True
    for start in range(0, t_flat.numel(), CHUNK_ELEMENTS):
        t = t_flat[start : start + CHUNK_ELEMENTS].to(torch.float64)  # [chunk]
        r = r_flat[start : start + CHUNK_ELEMENTS].to(torch.float64)  # [chunk]
        t_nan, t_inf, r_nan, r_inf = t.isnan(), t.isinf(), r.isnan(), r.isinf()
        t_census.add(t_nan, t_inf, start)
        r_census.add(r_nan, r_inf, start)
        t_bad, r_bad = t_nan | t_inf, r_nan | r_inf
        if bool(t_bad.any()) or bool(r_bad.any()):
            positions_match = positions_match and torch.equal(t_nan, r_nan) and torch.equal(t_inf, r_inf)
            if not positions_match:
                continue  # metrics will be NaN; keep counting NaN/Inf only
            t = t.masked_fill_(t_bad, 0.0)
            r = r.masked_fill_(r_bad, 0.0)
        sums.add(t, r, rel_dtype, eps_checker)
    return sums, t_census, r_census, positions_match


def _result(
    t_all: torch.Tensor,
    r_all: torch.Tensor,
    shape: tuple[int, ...],
    numel: int,
    rule: VerdictRule,
    sums: _Sums,
    t_census: _Census,
    r_census: _Census,
    positions_match: bool,
) -> TensorComparison:
    test_nf, ref_nf = t_census.result(shape), r_census.result(shape)
    if not positions_match:
        nan = math.nan
        reason = (
            f"NaN/Inf positions differ: test has {test_nf.nan_count} NaN / {test_nf.inf_count} Inf "
            f"(first at {test_nf.first_nan or test_nf.first_inf}), reference has "
            f"{ref_nf.nan_count} NaN / {ref_nf.inf_count} Inf"
        )
        return TensorComparison(
            str(t_all.dtype),
            str(r_all.dtype),
            shape,
            numel,
            nan,
            nan,
            nan,
            nan,
            nan,
            nan,
            nan,
            test_nf,
            ref_nf,
            False,
            nan,
            nan,
            Verdict.ERROR,
            reason,
        )

    cosine = _cosine(sums, numel)
    verdict, reason, error_share, warning_share = _judge(rule, cosine, numel, sums)
    empty = numel == 0
    return TensorComparison(
        test_dtype=str(t_all.dtype),
        reference_dtype=str(r_all.dtype),
        shape=shape,
        numel=numel,
        cosine=cosine,
        euclidean_distance=math.nan if empty else math.sqrt(sums.diff_sq),
        rmse=math.nan if empty else math.sqrt(sums.diff_sq / numel),
        max_abs_err=math.nan if empty else sums.max_abs,
        max_rel_err=math.nan if empty else sums.max_rel,
        one_thousandth_ratio=math.nan if empty else sums.under_one_thousandth / numel,
        five_thousandth_ratio=math.nan if empty else sums.under_five_thousandths / numel,
        test_nonfinite=test_nf,
        reference_nonfinite=ref_nf,
        nonfinite_positions_match=True,
        error_share=error_share,
        warning_share=warning_share,
        verdict=verdict,
        verdict_reason=reason,
    )
