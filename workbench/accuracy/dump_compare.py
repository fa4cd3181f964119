"""Compare two dumps module by module: metrics and verdicts in execution order, the first divergence and
the NaN origin.

`compare_dumps(test, reference)` accepts workbench dumps and msprobe dumps on either side. It checks the
two manifests first (same prompt, same modules, same shapes) and refuses a mismatched pair with one
message before reading any tensor; then it streams: load one test tensor and its reference, compare,
drop both. Peak memory stays near two tensors plus `metrics.CHUNK_ELEMENTS` of scratch.

- first divergence: the first record, in the test dump's execution order, whose verdict is error;
- NaN origin: the first test record whose output holds NaN/Inf while the inputs of that module call
  did not (so the fault is inside that module), found over all test records, compared or not.

An engine dump (vLLM's names, forward steps, `ascend_backend.vllm_plugin.dump`) against a one-pass
reference (transformers or the executor) is first lined up by `dump_engine.align_engine_dump`: rows by
token position, fused outputs split, decoder layers summed; the table's `level` column and the summary's
`mapping` notes say where each row was compared. Two engine dumps compare directly, name by name.

A tensor-parallel engine's rank dumps (`DIR/rank<R>`) are gathered into one dump first (`dump_gather`), so
a TP=2 engine compares with a TP=1 engine or with the float32 reference; what could not be gathered is
listed in the summary's `mapping` notes.

Shapes must agree once size-1 dimensions are dropped (msprobe squeezes both arrays too), so a model
run with a batch dimension ([1, S, H]) compares with an executor that has none ([S, H]).

When either side is stats-only, rows are judged from the statistics alone with the workbench's rule
(msprobe gives no per-tensor verdict for statistics): non-finite test stats with finite reference stats
-> error; else the relative difference of the L2 norms against the dtype's two thresholds
(half: 0.01 error / 0.001 warning, single: 0.001 / 0.0001).
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from tqdm.auto import tqdm

from workbench.accuracy.documents import DUMP_COMPARE_KIND
from workbench.accuracy.dump import open_dump
from workbench.accuracy.dump_engine import DerivedDump, EngineAlignment, align_engine_dump, is_engine_dump
from workbench.accuracy.dump_format import DumpMode, DumpRecord, WorkbenchDump
from workbench.accuracy.metrics import EXACT_RULE, compare_tensors, serial_torch, verdict_rule
from workbench.accuracy.msprobe_dump import MsprobeDump
from workbench.errors import WorkbenchError
from workbench.results.envelope import write_result
from workbench.results.verdict import Verdict

Dump = WorkbenchDump | MsprobeDump | DerivedDump
_LISTED = 5  # names quoted in a mismatch message


@dataclass(frozen=True)
class DumpComparisonSummary:
    """The headline of a compare; keys are record keys (`<module>.output.<i>`)."""

    test: str
    reference: str
    mode: DumpMode  # STATS when either side is stats-only
    compared: int
    passed: int
    warnings: int
    errors: int
    only_in_test: tuple[str, ...]
    only_in_reference: tuple[str, ...]
    first_divergence: str | None
    first_divergence_reason: str | None
    first_warning: str | None
    first_nonfinite: str | None
    nan_origin: str | None
    reference_nan_origin: str | None
    worst_cosine: float
    worst_cosine_key: str | None
    mapping: tuple[str, ...] = ()  # engine vs reference: levels compared at, steps, what was left out
    engine_nan_origin: str | None = None  # the NaN origin in the engine's own module names (and step)


@dataclass(frozen=True)
class DumpComparison:
    """Per-record results (one row per compared tensor, execution order) and the summary."""

    table: pd.DataFrame
    summary: DumpComparisonSummary

    def write(self, path: str | os.PathLike, provenance: dict[str, Any]) -> Path:
        """Write {"provenance": ..., "summary": ..., "rows": [...]} with NaN as null, atomically; refuses to
        write inside either dump."""
        target = Path(path).resolve()
        for source in (self.summary.test, self.summary.reference):
            if target.is_relative_to(Path(source).resolve()):
                raise WorkbenchError(f"--json {path} lies inside the dump {source}; write the report elsewhere")
        rows = [{k: _json_value(v) for k, v in row.items()} for row in self.table.to_dict(orient="records")]
        summary = {k: _json_value(v) for k, v in asdict(self.summary).items()}
        return write_result(target, {"summary": summary, "rows": rows}, provenance, DUMP_COMPARE_KIND)


def _json_value(value: object) -> object:
    if isinstance(value, DumpMode):
        return value.value
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else str(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def _check_pair(test: Dump, reference: Dump, allow_missing: bool) -> list[tuple[DumpRecord, DumpRecord]]:
    """Matched (test, reference) records in test order, after refusing mismatched dumps."""
    t_ids, r_ids = test.prompt_token_ids, reference.prompt_token_ids
    if t_ids is not None and r_ids is not None and t_ids != r_ids:
        where = next(
            (i for i, (a, b) in enumerate(zip(t_ids, r_ids, strict=False)) if a != b), min(len(t_ids), len(r_ids))
        )
        raise WorkbenchError(
            f"the dumps were captured for different prompts ({test.path}: {len(t_ids)} tokens, {reference.path}: "
            f"{len(r_ids)} tokens, first difference at token {where}); capture both with the same prompt"
        )
    by_key = {r.key: r for r in reference.records}
    test_keys = {r.key for r in test.records}
    only_test = [r.key for r in test.records if r.key not in by_key]
    only_ref = [r.key for r in reference.records if r.key not in test_keys]
    pairs = [(t, by_key[t.key]) for t in test.records if t.key in by_key]
    if not pairs:
        raise WorkbenchError(
            f"{test.path} and {reference.path} share no module output (e.g. {test.records[0].key if test.records else 'none'} "
            f"vs {reference.records[0].key if reference.records else 'none'}); capture both from the same model"
        )
    if (only_test or only_ref) and not allow_missing:
        missing = [f"only in test: {k}" for k in only_test[:_LISTED]] + [
            f"only in reference: {k}" for k in only_ref[:_LISTED]
        ]
        raise WorkbenchError(
            f"the dumps hold different modules ({len(only_test)} only in {test.path}, {len(only_ref)} only in "
            f"{reference.path}: {'; '.join(missing)}); capture both with the same --modules patterns, or pass "
            "--allow-missing (allow_missing=True) to compare the common ones"
        )
    bad_shapes = [(t.key, t.shape, r.shape) for t, r in pairs if squeezed(t.shape) != squeezed(r.shape)]
    if bad_shapes:
        listing = "; ".join(f"{k}: {list(a)} vs {list(b)}" for k, a, b in bad_shapes[:_LISTED])
        raise WorkbenchError(
            f"{len(bad_shapes)} module outputs differ in shape between {test.path} and {reference.path} ({listing}); "
            "capture both from the same model with the same inputs"
        )
    return pairs


def squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape without size-1 dimensions: msprobe compares `np.squeeze`d arrays, so [1, S, H] meets [S, H]."""
    return tuple(s for s in shape if s != 1)


def _base_row(t: DumpRecord, r: DumpRecord) -> dict:
    return {
        "index": t.index,
        "key": t.key,
        "module": t.module,
        "call": t.call,
        "step": t.step,
        "output_index": t.output_index,
        "test_dtype": t.dtype,
        "reference_dtype": r.dtype,
        "shape": str(list(t.shape)),
        "test_max": t.stats.max,
        "test_min": t.stats.min,
        "test_mean": t.stats.mean,
        "test_norm": t.stats.norm,
        "reference_max": r.stats.max,
        "reference_min": r.stats.min,
        "reference_mean": r.stats.mean,
        "reference_norm": r.stats.norm,
        "norm_rel_diff": _rel_diff(t.stats.norm, r.stats.norm),
        "test_nonfinite": t.nonfinite,
        "reference_nonfinite": r.nonfinite,
        "inputs_nonfinite": t.inputs_nonfinite,
    }


def _rel_diff(test: float, reference: float) -> float:
    if reference == 0:
        return 0.0 if test == 0 else math.inf
    return abs(test - reference) / abs(reference)


_TENSOR_COLUMNS = (
    "cosine",
    "euclidean_distance",
    "rmse",
    "max_abs_err",
    "max_rel_err",
    "one_thousandth_ratio",
    "five_thousandth_ratio",
    "test_nan_count",
    "test_inf_count",
    "reference_nan_count",
    "reference_inf_count",
)


def _tensor_row(test: Dump, reference: Dump, t: DumpRecord, r: DumpRecord) -> dict:
    test_tensor, ref_tensor = test.load(t), reference.load(r)
    if t.shape != r.shape:  # equal once squeezed (checked up front)
        test_tensor, ref_tensor = test_tensor.reshape(squeezed(t.shape)), ref_tensor.reshape(squeezed(r.shape))
    result = compare_tensors(test_tensor, ref_tensor)
    full = result.to_dict()
    row = _base_row(t, r) | {c: full[c] for c in _TENSOR_COLUMNS}
    row["test_nonfinite"] = result.test_nonfinite.any
    row["reference_nonfinite"] = result.reference_nonfinite.any
    return row | {"verdict": result.verdict.value, "reason": result.verdict_reason}


def _stats_row(t: DumpRecord, r: DumpRecord) -> dict:
    row = _base_row(t, r) | {c: math.nan for c in _TENSOR_COLUMNS}
    if t.nonfinite and not r.nonfinite:
        return row | {"verdict": Verdict.ERROR.value, "reason": "NaN/Inf in test statistics only"}
    rule = verdict_rule(_torch_dtype(t.dtype))
    diff = row["norm_rel_diff"]
    if rule is EXACT_RULE:
        same = (t.stats.max, t.stats.min, t.stats.mean) == (r.stats.max, r.stats.min, r.stats.mean) and diff == 0
        return row | {"verdict": (Verdict.PASS if same else Verdict.ERROR).value, "reason": "integer statistics"}
    if math.isnan(diff) or diff > rule.error_threshold:
        return row | {
            "verdict": Verdict.ERROR.value,
            "reason": f"norm relative difference {diff:.3g} > {rule.error_threshold}",
        }
    if diff > rule.warning_threshold:
        return row | {
            "verdict": Verdict.WARNING.value,
            "reason": f"norm relative difference {diff:.3g} > {rule.warning_threshold}",
        }
    return row | {
        "verdict": Verdict.PASS.value,
        "reason": f"norm relative difference {diff:.3g} within {rule.name} rule",
    }


def _torch_dtype(name: str) -> torch.dtype:
    """`torch.bfloat16` -> torch.bfloat16; unknown names judge as float32."""
    candidate = getattr(torch, name.removeprefix("torch."), None)
    return candidate if isinstance(candidate, torch.dtype) else torch.float32


def nan_origin(records: list[DumpRecord]) -> str | None:
    """Key of the first record whose output is non-finite while its call's inputs were finite."""
    return next((r.key for r in records if r.nonfinite and r.inputs_nonfinite is False), None)


def compare_dumps(
    test: str | os.PathLike | Dump,
    reference: str | os.PathLike | Dump,
    *,
    allow_missing: bool = False,
    progress: bool = False,
) -> DumpComparison:
    """Compare `test` (e.g. the NPU run) with `reference` (e.g. CPU float32), record by record."""
    test_dump = test if isinstance(test, WorkbenchDump | MsprobeDump) else open_dump(test)
    ref_dump = reference if isinstance(reference, WorkbenchDump | MsprobeDump) else open_dump(reference)
    gathered = [
        f"{side}: {note}"
        for side, dump in (("test", test_dump), ("reference", ref_dump))
        for note in getattr(dump, "notes", ())
    ]
    alignment = None
    if is_engine_dump(test_dump) != is_engine_dump(ref_dump):  # engine vs one-pass: map names, select rows
        with serial_torch():
            alignment = align_engine_dump(test_dump, ref_dump, progress=progress)
        test_dump, ref_dump = alignment.test, alignment.reference
    pairs = _check_pair(test_dump, ref_dump, allow_missing)
    tensors = test_dump.mode is DumpMode.TENSORS and ref_dump.mode is DumpMode.TENSORS
    rows = []
    with serial_torch():
        for t, r in tqdm(pairs, desc="compare", unit="tensor", disable=not progress):
            rows.append(_tensor_row(test_dump, ref_dump, t, r) if tensors else _stats_row(t, r))
    table = pd.DataFrame(rows)
    summary = _summarise(test_dump, ref_dump, table, tensors)
    if alignment is not None:
        table, summary = _with_alignment(table, summary, alignment)
    if gathered:  # what the tensor-parallel gathering left out, by module
        summary = replace(summary, mapping=summary.mapping + tuple(gathered))
    return DumpComparison(table, summary)


def _with_alignment(
    table: pd.DataFrame, summary: DumpComparisonSummary, alignment: EngineAlignment
) -> tuple[pd.DataFrame, DumpComparisonSummary]:
    """Add each row's level and the alignment's notes (steps, levels, what was left out)."""
    levels = {key: level.value for key, level in alignment.levels}
    table = table.assign(level=table["key"].map(levels))
    summary = replace(summary, mapping=alignment.notes, engine_nan_origin=alignment.engine_nan_origin)
    return table, summary


def _summarise(test: Dump, reference: Dump, table: pd.DataFrame, tensors: bool) -> DumpComparisonSummary:
    ref_keys = {r.key for r in reference.records}
    test_keys = {r.key for r in test.records}
    counts = table["verdict"].value_counts()
    errors = table[table["verdict"] == Verdict.ERROR.value]
    warnings = table[table["verdict"] == Verdict.WARNING.value]
    cosines = table["cosine"].dropna()
    worst = cosines.idxmin() if len(cosines) else None
    return DumpComparisonSummary(
        test=str(test.path),
        reference=str(reference.path),
        mode=DumpMode.TENSORS if tensors else DumpMode.STATS,
        compared=len(table),
        passed=int(counts.get(Verdict.PASS.value, 0)),
        warnings=int(counts.get(Verdict.WARNING.value, 0)),
        errors=int(counts.get(Verdict.ERROR.value, 0)),
        only_in_test=tuple(r.key for r in test.records if r.key not in ref_keys),
        only_in_reference=tuple(r.key for r in reference.records if r.key not in test_keys),
        first_divergence=errors["key"].iloc[0] if len(errors) else None,
        first_divergence_reason=errors["reason"].iloc[0] if len(errors) else None,
        first_warning=warnings["key"].iloc[0] if len(warnings) else None,
        first_nonfinite=next((r.key for r in test.records if r.nonfinite), None),
        nan_origin=nan_origin(test.records),
        reference_nan_origin=nan_origin(reference.records),
        worst_cosine=float(cosines.min()) if len(cosines) else math.nan,
        worst_cosine_key=table.loc[worst, "key"] if worst is not None else None,
    )
