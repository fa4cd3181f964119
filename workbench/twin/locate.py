"""From the first diverging token to the first diverging module, its op and a single-op repro (docs/METHOD.md §8, §15).

For the prompt that diverged first, both sides are started again with the engine dump switched on and
sent that prompt's token ids greedily for exactly `position + 1` steps: the prefill, then one decode step
per token up to the one that diverged. Every step before the last fed both engines the same tokens, so
their module outputs compare record by record (`compare-dumps`, engine against engine; a tensor-parallel
side's rank dumps are gathered first: `workbench.accuracy.dump_gather`). The first record whose verdict is
error is the first diverging module; the registry ops that ran inside it (recorded by the dump) name the
op, and the op's single-op repro script is exported with the module's shape and the side's dtype, to be
run on the device without the engine.

What a dump cannot see is said, not hidden:
- a dump needs an eager engine, so a compiled side is dumped eager: when the dumps then agree, the
  divergence lives in graph mode itself (docs/METHOD.md §13);
- a dump sends one prompt alone, so a divergence that needs the batch (batch invariance) shows up as
  dumps that agree;
- a side given as a URL cannot be restarted with the dump on: dump it where it runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import pandas as pd
import torch

from workbench.accuracy.dump_compare import DumpComparison, compare_dumps
from workbench.accuracy.dump_format import DumpRecord
from workbench.accuracy.dump_serving import capture_engine_dump
from workbench.accuracy.op_inputs import BUILDERS, TOKEN_PARAMS
from workbench.accuracy.opsuite import OpCase, export_repro, load_cases, run_case
from workbench.errors import WorkbenchError
from workbench.results.files import write_json
from workbench.settings import utc_stamp
from workbench.stack.devices import resolve_device
from workbench.stack.provenance import provenance
from workbench.twin.located import LocateResult
from workbench.twin.run import TwinResult
from workbench.twin.sides import Side

LOCATE_DIR = "locate"
_LAYER_PREFIX = re.compile(r"^(?:.*\.)?layers\.\d+(?:\.|$)")


def module_kind(module: str) -> str:
    """'model.layers.3.self_attn.qkv_proj' -> 'self_attn.qkv_proj'; 'model.layers.3' -> 'decoder layer'."""
    match = _LAYER_PREFIX.match(module)
    if match is None:
        return module
    rest = module[match.end() :]
    return rest or "decoder layer"


def worst_cosine_by_kind(table: pd.DataFrame) -> dict[str, float]:
    """The lowest cosine per module kind (every layer's instance of a module together), lowest first."""
    if table.empty or "cosine" not in table:
        return {}
    worst = table.assign(kind=table["module"].map(module_kind)).groupby("kind")["cosine"].min().sort_values()
    return {str(k): float(v) for k, v in worst.items()}


def _dumpable(side: Side) -> str | None:
    if side.recipe is None:
        return (
            f"side {side.label} is a URL: it cannot be restarted with the dump on; dump it where it runs "
            "(`ascend-workbench dump --recipe ... --steps N`)"
        )
    return None


def _finished_dump(where: Path) -> bool:
    """Whether `where` holds a readable dump; a dump cut short is moved aside (kept) so it is captured again."""
    from workbench.accuracy.dump import open_dump

    if not where.exists() or not any(where.iterdir()):
        return False
    try:
        open_dump(where)
        return True
    except WorkbenchError:
        where.rename(where.with_name(f"{where.name}.incomplete-{utc_stamp()}"))
        return False


def _first(comparison: DumpComparison) -> tuple[pd.Series | None, str | None]:
    table = comparison.table
    for verdict in ("error", "warning"):
        rows = table[table["verdict"] == verdict]
        if len(rows):
            return rows.iloc[0], verdict
    return None, None


def repro_case(op: str, record: DumpRecord, dtype: torch.dtype) -> OpCase | None:
    """A single-op case for `op` at the diverging module's shape (token-wise ops), else the op suite's own."""
    if op not in BUILDERS:
        return None
    if BUILDERS[op][1] == TOKEN_PARAMS and len(record.shape) >= 2:
        tokens = max(1, int(torch.tensor(record.shape[:-1]).prod()))
        return OpCase(op, (("hidden", int(record.shape[-1])), ("tokens", tokens)), dtype)
    cases = [c for c in load_cases(ops=[op]) if c.dtype == dtype] or load_cases(ops=[op])
    return cases[0] if cases else None


def _export_repro(op: str, record: DumpRecord, side: Side, out: Path) -> tuple[str | None, str | None]:
    """(the repro script, a note): the op run alone on side B's device against its float32 native reference."""
    dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}.get(side.recipe.dtype.value, torch.float32)
    case = repro_case(op, record, dtype)
    if case is None:
        return None, f"op {op} has no input builder in workbench.accuracy.op_inputs: no single-op repro exported"
    result = run_case(case, resolve_device(side.recipe.device.value))
    script = export_repro(result, out)
    said = (
        f"{op} alone on {result.device} ({result.implementation}, {case.case_label}) against its float32 "
        f"reference: {result.verdict.value}"
    )
    if result.verdict.value == "pass":
        said += " (its arithmetic alone is right here: look at what the engine hands it, or at an injected fault)"
    return str(script), said


def wants_locate(result: TwinResult, prompt: int | None = None) -> bool:
    """Whether the module stage has something to do: a prompt was named, or one diverged (near ties too),
    and both sides are recipes the workbench can restart with the dump on."""
    dumpable = all(side.recipe is not None for side in result.sides)
    return dumpable and (prompt is not None or result.first_divergence(near_ties=True) is not None)


def locate(
    result: TwinResult,
    *,
    prompt: int | None = None,
    steps: int | None = None,
    extra_env: Mapping[str, str] | None = None,
    extra_args: tuple[str, ...] = (),
    progress: bool = True,
) -> LocateResult:
    """Dump both sides at the first divergence (or at `prompt`, for `steps`), compare, name module and op.

    Writes `locate/A`, `locate/B` (the dumps), `locate/compare.json` and `locate/repro/` in the run directory.
    """
    a, b = result.sides
    for side in (a, b):
        refusal = _dumpable(side)
        if refusal:
            raise WorkbenchError(refusal)
    if prompt is None:
        found = result.first_divergence() or result.first_divergence(near_ties=True)
        if found is None:
            raise WorkbenchError(
                "no prompt diverged: there is no diverging step to dump; pass prompt=N and steps=K (--locate-prompt, "
                "--locate-steps) to compare the two sides' modules anyway"
            )
        prompt, steps = found.prompt, (found.position or 0) + 1
    if not 0 <= prompt < len(result.prompt_tokens):
        raise WorkbenchError(f"prompt {prompt}: the run has prompts 0 to {len(result.prompt_tokens) - 1}")
    steps = steps or 1
    root = result.directory / LOCATE_DIR / f"prompt{prompt}-steps{steps}"
    dumps = {}
    for side in (a, b):
        where = root / side.label
        if not _finished_dump(where):  # a resumed locate keeps a finished dump
            capture_engine_dump(
                side.recipe,
                result.prompt_tokens[prompt],
                where,
                steps=steps,
                extra_env=extra_env,
                extra_args=extra_args,
                progress=progress,
            )
        dumps[side.label] = where
    comparison = compare_dumps(dumps["B"], dumps["A"], allow_missing=True, progress=progress)
    comparison.write(root / "compare.json", provenance(recipe=b.recipe))
    located = _summarize(result, comparison, prompt, steps, root, b)
    write_json(root / "locate.json", located.to_dict())
    return located


def _summarize(
    result: TwinResult, comparison: DumpComparison, prompt: int, steps: int, root: Path, side_b: Side
) -> LocateResult:
    from workbench.accuracy.dump import open_dump

    notes = list(comparison.summary.mapping)
    a, b = result.sides
    if any(s.recipe is not None and s.recipe.engine.enforce_eager is not True for s in (a, b)):
        notes.append(
            "a compiled side was dumped in eager mode (hooks need eager): when the dumps agree, the "
            "divergence lives in graph mode itself (docs/METHOD.md §13)"
        )
    if a.batch != b.batch:
        notes.append(
            f"the sides batch differently ({a.batch} vs {b.batch} prompts per request) but a dump sends the "
            "prompt alone: dumps that agree say the divergence needs the batch"
        )
    row, verdict = _first(comparison)
    ops: tuple[str, ...] = ()
    repro = None
    if row is not None:
        test = open_dump(root / "B")
        ops = tuple(test.header.module_ops.get(str(row["module"]), ()))
        record = next(r for r in test.records if r.key == row["key"])
        if verdict == "warning":
            notes.append("no module output crossed the error thresholds; the first warning is named instead")
        if len(ops) == 1:
            repro, note = _export_repro(ops[0], record, side_b, root / "repro")
            notes.append(note)
        elif ops:
            notes.append(f"the module runs {len(ops)} registry ops ({', '.join(ops)}): look inside it for the first")
    summary = comparison.summary
    return LocateResult(
        prompt=prompt,
        prompt_name=result.prompt_names[prompt],
        steps=steps,
        directory=str(root),
        compared=summary.compared,
        errors=summary.errors,
        first_module=str(row["module"]) if row is not None else None,
        first_key=str(row["key"]) if row is not None else None,
        first_step=int(row["step"]) if row is not None and row["step"] == row["step"] else None,
        reason=str(row["reason"]) if row is not None else None,
        ops=ops,
        repro=repro,
        worst_cosine_by_kind=worst_cosine_by_kind(comparison.table),
        notes=tuple(notes),
    )


__all__ = ["LocateResult", "locate", "module_kind", "repro_case", "wants_locate", "worst_cosine_by_kind"]
