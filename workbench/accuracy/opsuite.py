"""The op suite: every registry op, per dtype and case, on the target device vs native float32 on CPU.

The fastest NaN hunt (docs/METHOD.md §8, §15) is "one tensor, one op, compare with a reference". The suite does that
for every op the backend has, from cases in `recipes/ops/*.yaml`, and turns any failing case into a
standalone reproduction script (plain torch + ascend_backend, no workbench) that a kernel engineer can
run on the NPU without this project.

Each case runs twice on identical inputs (generated in float32 on CPU by `workbench.accuracy.op_inputs`, then
rounded to the target dtype):
  test:      the implementation the registry chooses for the target device, in the target dtype;
  reference: the native implementation, on those rounded values upcast to float32, on CPU.
Ops returning several tensors (add_rms_norm's (out, residual), rotary's (query, key)) are compared
output by output; a case's verdict is its worst output's.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from pydantic import Field

from ascend_backend.registry import REGISTRY, Backend
from workbench import settings
from workbench.accuracy.documents import OP_SUITE_KIND
from workbench.accuracy.metrics import TensorComparison, compare_tensors
from workbench.accuracy.op_inputs import BUILDERS, OpInputs, make_inputs
from workbench.errors import WorkbenchError
from workbench.recipes import Frozen, load_recipe_file
from workbench.results.envelope import write_result
from workbench.results.verdict import Verdict
from workbench.stack.dtypes import dtype_name, parse_dtype


# ----------------------------------------------------------------------------- recipe schema
class _OpEntry(Frozen):
    cases: list[dict[str, int]] = Field(min_length=1)
    dtypes: list[str] | None = None


class _SuiteFile(Frozen):
    description: str = ""
    dtypes: list[str] = Field(default_factory=lambda: ["float16", "bfloat16", "float32"])
    seed: int = 0
    ops: dict[str, _OpEntry]


@dataclass(frozen=True)
class OpCase:
    op: str
    params: tuple[tuple[str, int], ...]  # sorted (name, size) pairs: hashable and printable
    dtype: torch.dtype
    seed: int = 0

    @property
    def case_label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.params)

    @property
    def name(self) -> str:
        """File-system friendly id, e.g. rms_norm__hidden-896_tokens-16__bfloat16."""
        sizes = "_".join(f"{k}-{v}" for k, v in self.params)
        return f"{self.op}__{sizes}__{dtype_name(self.dtype)}"

    def inputs(self) -> OpInputs:
        return make_inputs(self.op, dict(self.params), self.seed)


def default_recipes() -> list[Path]:
    return sorted((settings.recipes_dir() / "ops").glob("*.yaml"))


def load_cases(paths: Sequence[Path] | None = None, ops: Sequence[str] = ()) -> list[OpCase]:
    """Cases from op-suite recipes (default: recipes/ops/*.yaml), optionally only the named ops."""
    paths = list(paths) if paths else default_recipes()
    if not paths:
        raise WorkbenchError(f"no op-suite recipes in {settings.recipes_dir() / 'ops'}; pass --recipe FILE")
    cases: list[OpCase] = []
    for path in paths:
        cases.extend(_cases_from_file(Path(path)))
    if ops:
        unknown = sorted(set(ops) - set(REGISTRY.ops()))
        if unknown:
            raise WorkbenchError(f"unknown op(s) {unknown}; registry ops: {', '.join(REGISTRY.ops())}")
        cases = [c for c in cases if c.op in ops]
        if not cases:
            raise WorkbenchError(f"the recipes have no cases for {list(ops)}")
    return cases


def _cases_from_file(path: Path) -> list[OpCase]:
    if not path.is_file():
        raise WorkbenchError(f"op-suite recipe {path} not found")
    suite = load_recipe_file(_SuiteFile, path, what="op-suite recipe", required="'ops'")
    cases = []
    for op, entry in suite.ops.items():
        if op not in REGISTRY.ops():
            raise WorkbenchError(f"{path}: ops.{op}: unknown op; registry ops: {', '.join(REGISTRY.ops())}")
        if op not in BUILDERS:
            raise WorkbenchError(f"{path}: ops.{op}: no input builder for this op in workbench.accuracy.op_inputs")
        for params in entry.cases:
            try:
                make_inputs(op, params, suite.seed)  # validate the sizes now, with the file named in the error
            except WorkbenchError as exc:
                raise WorkbenchError(f"{path}: ops.{op}: {exc}") from None
            for dtype in entry.dtypes or suite.dtypes:
                try:
                    torch_dtype = parse_dtype(dtype)
                except WorkbenchError as exc:
                    raise WorkbenchError(f"{path}: ops.{op}: {exc}") from None
                cases.append(OpCase(op, tuple(sorted(params.items())), torch_dtype, suite.seed))
    return cases


# ----------------------------------------------------------------------------- running
@dataclass(frozen=True)
class OutputResult:
    index: int
    comparison: TensorComparison


@dataclass(frozen=True)
class CaseResult:
    case: OpCase
    device: str
    implementation: str
    outputs: tuple[OutputResult, ...]
    error: str | None = None  # the op raised: the text of the exception

    @property
    def verdict(self) -> Verdict:
        if self.error is not None or not self.outputs:
            return Verdict.ERROR
        return Verdict.worst(o.comparison.verdict for o in self.outputs)

    def _worst(self) -> OutputResult:
        """The output with the worst verdict; ties go to the lower cosine (NaN counts as lowest)."""

        def badness(o: OutputResult) -> tuple[int, float]:
            cosine = o.comparison.cosine
            return o.comparison.verdict.severity, -(cosine if cosine == cosine else -2.0)

        return max(self.outputs, key=badness)

    def row(self) -> dict[str, Any]:
        c = self._worst().comparison if self.outputs else None
        return {
            "op": self.case.op,
            "case": self.case.case_label,
            "dtype": dtype_name(self.case.dtype),
            "device": self.device,
            "implementation": self.implementation,
            "verdict": self.verdict.value,
            "cosine": c.cosine if c else float("nan"),
            "max_abs_err": max((o.comparison.max_abs_err for o in self.outputs), default=float("nan")),
            "max_rel_err": max((o.comparison.max_rel_err for o in self.outputs), default=float("nan")),
            "one_thousandth_ratio": min(
                (o.comparison.one_thousandth_ratio for o in self.outputs), default=float("nan")
            ),
            "five_thousandth_ratio": min(
                (o.comparison.five_thousandth_ratio for o in self.outputs), default=float("nan")
            ),
            "nan_count": sum(o.comparison.test_nonfinite.nan_count for o in self.outputs),
            "inf_count": sum(o.comparison.test_nonfinite.inf_count for o in self.outputs),
            "reason": self.error or (c.verdict_reason if c else ""),
            "name": self.case.name,
        }


def run_case(case: OpCase, device: torch.device) -> CaseResult:
    inputs = case.inputs()
    selection = REGISTRY.select(case.op, device)
    # The reference sees the same values as the test: inputs rounded to the test dtype, then computed in
    # float32. This measures the op's own arithmetic, as msprobe's API checker does, not input rounding.
    rounded = inputs.to("cpu", case.dtype).to("cpu", torch.float32)
    reference = rounded.outputs(REGISTRY.impl(case.op, Backend.NATIVE)(*rounded.args))
    on_device = inputs.to(device, case.dtype)
    try:
        test = on_device.outputs(REGISTRY.dispatch(case.op, device, *on_device.args))
    except Exception as exc:  # noqa: BLE001 - a kernel that raises is a finding, not a crash of the suite
        return CaseResult(case, str(device), selection.backend.value, (), f"{type(exc).__name__}: {exc}")
    if len(test) != len(reference):
        return CaseResult(
            case,
            str(device),
            selection.backend.value,
            (),
            f"returned {len(test)} tensors, the native reference {len(reference)}",
        )
    outputs = tuple(OutputResult(i, compare_tensors(t.cpu(), r)) for i, (t, r) in enumerate(zip(test, reference)))
    return CaseResult(case, str(device), selection.backend.value, outputs)


@dataclass(frozen=True)
class SuiteResult:
    results: tuple[CaseResult, ...]

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([r.row() for r in self.results])

    def failures(self, at_least: Verdict = Verdict.ERROR) -> list[CaseResult]:
        return [r for r in self.results if r.verdict.severity >= at_least.severity]

    def counts(self) -> dict[str, int]:
        table = self.table()
        return {v.value: int((table["verdict"] == v.value).sum()) for v in Verdict} if len(table) else {}

    def write(self, path: Path, device: str) -> Path:
        """`compare-ops --json`: counts and one row per case, stamped as an `op-suite` document."""
        from workbench.stack.provenance import provenance

        document = {"counts": self.counts(), "rows": self.table().to_dict(orient="records")}
        return write_result(path, document, provenance(device=device), OP_SUITE_KIND)


def run_suite(
    cases: Iterable[OpCase],
    device: torch.device | str = "cpu",
    progress: bool = True,
    on_result: Callable[[CaseResult], None] | None = None,
) -> SuiteResult:
    """Run every case; `on_result` sees each result as it is produced (e.g. to append to a file)."""
    from tqdm.auto import tqdm

    device = torch.device(device) if isinstance(device, str) else device
    cases = list(cases)
    results = []
    for case in tqdm(cases, desc="op suite", unit="case", disable=not progress):
        result = run_case(case, device)  # type: ignore[arg-type]
        results.append(result)
        if on_result is not None:
            on_result(result)
    return SuiteResult(tuple(results))


def save_jsonl(result: CaseResult, path: Path) -> None:
    """Append one case's row (results are saved as they are produced)."""
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(result.row(), default=float) + "\n")


# ----------------------------------------------------------------------------- reproduction scripts
_REPRO_TEMPLATE = '''\
"""Single-op reproduction exported by the Ascend Porting Workbench op suite.

Case:      {label}
Device:    {device} (implementation chosen there: {implementation})
Verdict:   {verdict} — {reason}

Runs op {op!r} on the device in {dtype} and the native implementation in float32 on CPU on the same
inputs (saved beside this script), and prints how far apart they are. Needs only torch and
ascend_backend:  python {script} [--device npu:0]
"""

import argparse
from pathlib import Path

import torch

from ascend_backend.registry import REGISTRY, Backend  # the registry loads every op on first use

OP = {op!r}
DTYPE = torch.{dtype}


def to_device(args, device, host_args=(), dtype=DTYPE):
    """Float tensors -> device and dtype (copies); integer tensors -> device, except host-side lengths."""
    return [a.to(device=device, dtype=dtype, copy=True) if isinstance(a, torch.Tensor) and a.is_floating_point()
            else a.to(device) if isinstance(a, torch.Tensor) and i not in host_args else a
            for i, a in enumerate(args)]


def outputs(returned, args, written_args):
    """What the call returned, then the arguments it wrote in place (e.g. a KV cache)."""
    items = returned if isinstance(returned, (tuple, list)) else (returned,)
    return [t for t in items if isinstance(t, torch.Tensor)] + [args[i] for i in written_args]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default={device!r})
    device = parser.parse_args().device
    saved = torch.load(Path(__file__).with_suffix(".pt"), weights_only=True)
    args, host, written = saved["args"], set(saved["host_args"]), saved["written_args"]
    print("implementation on", device, ":", REGISTRY.select(OP, device).backend.value)
    # Reference: the same dtype-rounded values, computed in float32 on CPU.
    rounded = to_device(to_device(args, "cpu", host), "cpu", host, torch.float32)
    reference = outputs(REGISTRY.impl(OP, Backend.NATIVE)(*rounded), rounded, written)
    on_device = to_device(args, device, host)
    test = outputs(REGISTRY.dispatch(OP, device, *on_device), on_device, written)
    for i, (t, r) in enumerate(zip(test, reference)):
        t64, r64 = t.detach().cpu().double().flatten(), r.double().flatten()
        cosine = torch.nn.functional.cosine_similarity(t64, r64, dim=0).item()
        abs_err = (t64 - r64).abs()
        rel_err = abs_err / r64.abs().clamp_min(torch.finfo(torch.float32).eps)
        print(f"output {{i}}: cosine={{cosine:.6f}} max_abs_err={{abs_err.max().item():.3e}} "
              f"max_rel_err={{rel_err.max().item():.3e}} nan={{int(t64.isnan().sum())}} inf={{int(t64.isinf().sum())}}")


if __name__ == "__main__":
    main()
'''


def export_repro(result: CaseResult, out_dir: Path) -> Path:
    """Write `<case>.py` and `<case>.pt` (the inputs) into out_dir; returns the script path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    case = result.case
    script = out_dir / f"{case.name}.py"
    inputs = case.inputs()
    torch.save(
        {"args": list(inputs.args), "host_args": sorted(inputs.host_args), "written_args": list(inputs.written_args)},
        script.with_suffix(".pt"),
    )
    row = result.row()
    script.write_text(
        _REPRO_TEMPLATE.format(
            label=f"{case.op} [{case.case_label}] {dtype_name(case.dtype)}",
            device=result.device,
            implementation=result.implementation,
            verdict=result.verdict.value,
            reason=textwrap.shorten(str(row["reason"]), 150),
            op=case.op,
            dtype=dtype_name(case.dtype),
            script=script.name,
        ),
        encoding="utf-8",
    )
    return script


def case_detail(result: CaseResult) -> pd.DataFrame:
    """One row per output of a case with every metric: the drill-down view."""
    rows = []
    for o in result.outputs:
        c = o.comparison
        rows.append(
            {
                "output": o.index,
                "verdict": c.verdict.value,
                "cosine": c.cosine,
                "max_abs_err": c.max_abs_err,
                "max_rel_err": c.max_rel_err,
                "one_thousandth_ratio": c.one_thousandth_ratio,
                "five_thousandth_ratio": c.five_thousandth_ratio,
                "rmse": c.rmse,
                "euclidean_distance": c.euclidean_distance,
                "nan": c.test_nonfinite.nan_count,
                "inf": c.test_nonfinite.inf_count,
                "reason": c.verdict_reason,
            }
        )
    return pd.DataFrame(rows)


def worst_case(suite: SuiteResult) -> CaseResult:
    """The case to look at first: worst verdict, then lowest cosine."""
    if not suite.results:
        raise WorkbenchError("the op suite produced no results")
    return max(suite.results, key=lambda r: (r.verdict.severity, -r.row()["cosine"] if r.outputs else 2.0))


def describe_failure(result: CaseResult) -> str:
    """A short text for notebooks: which output failed and how."""
    if result.error:
        return f"{result.case.op} raised {result.error}"
    lines = [f"{result.case.op} [{result.case.case_label}] {dtype_name(result.case.dtype)}: {result.verdict.value}"]
    for o in result.outputs:
        c = o.comparison
        lines.append(
            f"  output {o.index}: {c.verdict.value} cosine={c.cosine:.6f} max_abs={c.max_abs_err:.3e} "
            f"max_rel={c.max_rel_err:.3e} ({c.verdict_reason})"
        )
    return "\n".join(lines)


__all__ = [
    "CaseResult",
    "OpCase",
    "SuiteResult",
    "case_detail",
    "default_recipes",
    "describe_failure",
    "worst_case",
    "export_repro",
    "load_cases",
    "run_case",
    "run_suite",
    "save_jsonl",
]
