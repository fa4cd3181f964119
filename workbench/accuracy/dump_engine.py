"""Line an engine dump up with a one-pass reference dump: steps by token position, names by `vllm_names`.

An engine dump (`ascend_backend.vllm_plugin.dump`) holds forward *steps*: step 0 is the prompt's
prefill (rows = the prompt's tokens), each later step decodes one token (one row), and tensors are
flattened to [num_tokens, features]. A reference dump (transformers or the executor, float32) holds one
forward pass over a token sequence, [1, seq, features] or [seq, features]. Row r of an engine step is the
token at `positions[r]`, so it meets row `positions[r]` of the reference, provided the reference was run
on the same tokens: the prompt alone covers the prefill; the prompt plus the generated tokens covers the
decode steps too (`ascend-workbench dump --recipe ... --reference DIR` captures exactly that).

`align_engine_dump(engine, reference)` returns two `DerivedDump`s with matching keys (`<reference
module>.output.0` for step 0, `....call<step>.output.0` for later steps) whose tensors are computed on
demand: engine outputs mapped, split or summed as `vllm_names` says, reference rows selected by
position. `dump_compare.compare_dumps` compares them like any two dumps and keeps the level each row was
compared at. Both dumps must hold tensors (rows cannot be selected or split from statistics).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from workbench.accuracy.dump_format import (
    SOURCE_ENGINE,
    DumpMode,
    DumpRecord,
    StepRecord,
    TensorStats,
    WorkbenchDump,
)
from workbench.accuracy.vllm_names import Level, Mapping, Unmapped, map_module
from workbench.errors import WorkbenchError

TensorFn = Callable[[], torch.Tensor]
_LISTED = 6


class DerivedDump:
    """A dump assembled from another one: each record's tensor is computed from the source on demand.

    Quacks like `WorkbenchDump` for `compare_dumps` (path, records, mode, prompt_token_ids, load). Record
    statistics are computed when a record is added, so its tensor is computed twice in all (here and
    when compared); memory stays near two tensors.
    """

    kind = "derived"
    mode = DumpMode.TENSORS
    prompt_token_ids = None  # the alignment checked the tokens step by step

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: list[DumpRecord] = []
        self._tensors: list[TensorFn] = []

    def add(self, module: str, step: int, tensor_fn: TensorFn, inputs_nonfinite: bool | None, device: str) -> None:
        tensor = tensor_fn()
        floating = tensor.is_floating_point()
        nans = int(tensor.isnan().sum()) if floating else 0
        infs = int(tensor.isinf().sum()) if floating else 0
        self.records.append(
            DumpRecord(
                index=len(self.records),
                module=module,
                call=step,
                output_index=0,
                dtype=str(tensor.dtype),
                shape=tuple(tensor.shape),
                stats=TensorStats.of(tensor),
                nan_count=nans,
                inf_count=infs,
                nonfinite=bool(nans or infs),
                inputs_nonfinite=inputs_nonfinite,
                file=None,
                device=device,
                step=step,
            )
        )
        self._tensors.append(tensor_fn)

    def load(self, record: DumpRecord) -> torch.Tensor:
        return self._tensors[record.index]()

    def __iter__(self):
        return iter(self.records)


@dataclass(frozen=True)
class EngineAlignment:
    """The two aligned dumps, the level of each compared key, and what was left out and why."""

    test: DerivedDump
    reference: DerivedDump
    levels: tuple[tuple[str, Level], ...]  # (record key, level) in test order
    notes: tuple[str, ...]
    steps: tuple[int, ...]
    engine_nan_origin: str | None  # "<vLLM module> (step k)": where the engine's own names put the NaN


def is_engine_dump(dump: object) -> bool:
    return isinstance(dump, WorkbenchDump) and dump.source == SOURCE_ENGINE


def _require(engine: object, reference: object) -> None:
    if not is_engine_dump(engine):
        raise WorkbenchError(
            f"{getattr(reference, 'path', reference)} is an engine dump but {getattr(engine, 'path', engine)} is not: "
            "give the engine dump as TEST and the transformers/executor dump as REFERENCE"
        )
    if not isinstance(reference, WorkbenchDump) or is_engine_dump(reference):
        raise WorkbenchError(
            f"{reference.path}: an engine dump is compared against a workbench dump of one forward pass (transformers "
            "or the executor, e.g. `ascend-workbench dump --model DIR --token-ids ...`), not an msprobe dump"
        )
    for dump in (engine, reference):
        if dump.mode is not DumpMode.TENSORS:
            raise WorkbenchError(
                f"{dump.path} is stats-only: lining an engine dump up with a reference selects rows and splits fused "
                "outputs, which needs tensors; capture it again without --stats-only (or compare two engine dumps)"
            )
    if reference.prompt_token_ids is None:
        raise WorkbenchError(f"{reference.path} does not record its token ids; capture it with --prompt or --token-ids")


def _usable_steps(engine: WorkbenchDump, ref_ids: tuple[int, ...]) -> tuple[list[StepRecord], list[str]]:
    """The steps that can meet the reference (one sequence, inside its tokens), and notes on the others."""
    usable, notes = [], []
    diverged = False
    for step in engine.steps:
        pos = step.positions
        if not pos or pos != tuple(range(pos[0], pos[0] + len(pos))):
            notes.append(f"step {step.step} not compared: it holds several sequences (only one-sequence steps are)")
            continue
        if pos[-1] >= len(ref_ids):
            notes.append(
                f"step {step.step} (positions {pos[0]}..{pos[-1]}) not compared: the reference holds {len(ref_ids)} "
                "tokens; capture it on the engine's tokens (`dump --recipe ... --reference DIR` does)"
            )
            continue
        wanted = ref_ids[pos[0] : pos[-1] + 1]
        if step.token_ids is not None and step.token_ids != wanted and pos[0] == 0:
            raise WorkbenchError(
                f"engine step {step.step} of {engine.path} fed tokens {list(step.token_ids)[:_LISTED]} at positions "
                f"{pos[0]}..{pos[-1]}, the reference {list(wanted)[:_LISTED]}: the dumps were captured for different "
                "prompts; capture the reference on the engine's tokens (`dump --recipe ... --reference DIR`)"
            )
        if diverged or (step.token_ids is not None and step.token_ids != wanted):
            diverged = True  # the engine generated another token than the reference ran: a different sequence
            notes.append(
                f"step {step.step} not compared: the engine fed token(s) {list(step.token_ids or ())[:_LISTED]} at "
                f"position {pos[0]}, the reference {list(wanted)[:_LISTED]} (the engine's output diverged earlier)"
            )
            continue
        usable.append(step)
    if not usable:
        raise WorkbenchError(f"no step of {engine.path} can be compared with the reference: " + "; ".join(notes))
    return usable, notes


def _rows(tensor: torch.Tensor, positions: tuple[int, ...], seq_len: int) -> torch.Tensor:
    """Rows `positions` of a reference output [1, S, F] or [S, F] -> [len(positions), F]."""
    flat = tensor.reshape(-1, tensor.shape[-1])  # [S, F]: the reference runs one sequence
    if flat.shape[0] != seq_len:
        raise WorkbenchError(
            f"a reference output of shape {list(tensor.shape)} does not hold one row per token ({seq_len} tokens)"
        )
    return flat[list(positions)]


class _Aligner:
    """Builds the two derived dumps group by group (one engine module call = one group)."""

    def __init__(self, engine: WorkbenchDump, reference: WorkbenchDump, steps: list[StepRecord]) -> None:
        self.engine, self.reference = engine, reference
        self.steps = {s.step: s for s in steps}
        self.ref_ids = reference.prompt_token_ids or ()
        self.ref_by_module = {r.module: r for r in reference.records if r.call == 0 and r.output_index == 0}
        self.test = DerivedDump(engine.path)
        self.ref = DerivedDump(reference.path)
        self.levels: list[tuple[str, Level]] = []
        self.unmapped: dict[str, str] = {}
        self.no_reference: dict[str, str] = {}

    def groups(self) -> list[list[DumpRecord]]:
        """Engine records of the usable steps grouped per module call, in execution order."""
        grouped: dict[tuple[str, int], list[DumpRecord]] = {}
        for record in self.engine.records:
            if record.step in self.steps:
                grouped.setdefault((record.module, record.call), []).append(record)
        return list(grouped.values())

    def add_group(self, group: list[DumpRecord]) -> None:
        mapping = map_module(group[0].module)
        if isinstance(mapping, Unmapped):
            self.unmapped.setdefault(mapping.engine_module, mapping.reason)
            return
        outputs = {r.output_index: r for r in group}
        refs = [self.ref_by_module.get(m) for m in mapping.reference_modules]
        if any(i not in outputs for i in mapping.engine_outputs):
            self.no_reference[mapping.engine_module] = f"the engine recorded outputs {sorted(outputs)} only"
        elif any(r is None for r in refs):
            missing = [m for m, r in zip(mapping.reference_modules, refs) if r is None]
            self.no_reference[mapping.engine_module] = f"the reference has no {', '.join(missing)}"
        elif any(math.prod(r.shape[:-1]) != len(self.ref_ids) for r in refs):
            shapes = ", ".join(str(list(r.shape)) for r in refs)
            self.no_reference[mapping.engine_module] = f"the reference output ({shapes}) is not one row per token"
        else:
            self._pair(mapping, outputs, refs, self.steps[group[0].step])

    def _pair(self, mapping: Mapping, outputs: dict[int, DumpRecord], refs: list[DumpRecord], step: StepRecord) -> None:
        first = outputs[0]
        load = self.engine.load
        if mapping.level is Level.SUM:  # vLLM's layer hands back (hidden, residual); the layer output is their sum
            second = outputs[1]

            def summed() -> torch.Tensor:
                hidden, residual = load(first), load(second)  # [T, H] each
                return (hidden.float() + residual.float()).to(hidden.dtype)

            parts = [summed]
        elif mapping.level is Level.SPLIT:
            sizes = [r.shape[-1] for r in refs]
            if sum(sizes) != first.shape[-1]:
                self.no_reference[mapping.engine_module] = (
                    f"its {first.shape[-1]} features are not {' + '.join(map(str, sizes))} (a tensor-parallel shard?)"
                )
                return
            parts = [lambda i=i: load(first).split(sizes, dim=-1)[i] for i in range(len(sizes))]
        else:
            parts = [lambda: load(first)]
        positions = step.positions
        if mapping.level is Level.LAST_TOKEN:
            if first.shape[0] != 1:
                self.no_reference[mapping.engine_module] = f"step {step.step} sampled {first.shape[0]} rows, not one"
                return
            positions = positions[-1:]  # the logits of a sequence come from its last token
        seq_len = len(self.ref_ids)
        for module, ref, tensor_fn in zip(mapping.reference_modules, refs, parts, strict=True):
            self.test.add(module, step.step, tensor_fn, first.inputs_nonfinite, first.device)
            self.ref.add(
                module,
                step.step,
                lambda ref=ref: _rows(self.reference.load(ref), positions, seq_len),
                ref.inputs_nonfinite,
                ref.device,
            )
            self.levels.append((self.test.records[-1].key, mapping.level))

    def notes(self) -> list[str]:
        counts: dict[Level, int] = {}
        for _, level in self.levels:
            counts[level] = counts.get(level, 0) + 1
        notes = ["compared at: " + ", ".join(f"{level.value} {n}" for level, n in counts.items())]
        by_reason: dict[str, list[str]] = {}
        for module, reason in self.unmapped.items():
            by_reason.setdefault(reason, []).append(module)
        for reason, modules in by_reason.items():
            notes.append(
                f"not compared ({len(modules)}: {', '.join(modules[:3])}{', ...' if len(modules) > 3 else ''}): "
                f"{reason}"
            )
        notes += [f"not compared: {m}: {why}" for m, why in list(self.no_reference.items())[:_LISTED]]
        return notes


def align_engine_dump(engine: object, reference: object, *, progress: bool = False) -> EngineAlignment:
    """Line engine dump `engine` up with one-pass reference dump `reference` (see the module docstring)."""
    _require(engine, reference)
    steps, step_notes = _usable_steps(engine, reference.prompt_token_ids or ())
    aligner = _Aligner(engine, reference, steps)
    for group in tqdm(aligner.groups(), desc="align", unit="output", disable=not progress):
        aligner.add_group(group)
    if not aligner.test.records:
        raise WorkbenchError(
            f"no output of {engine.path} maps onto {reference.path}: " + "; ".join(aligner.notes()[1:_LISTED])
        )
    described = [f"steps compared: {', '.join(str(s.step) for s in steps)} ({_describe_steps(steps)})"]
    origin = next((r for r in engine.records if r.nonfinite and r.inputs_nonfinite is False), None)
    return EngineAlignment(
        test=aligner.test,
        reference=aligner.ref,
        levels=tuple(aligner.levels),
        notes=tuple(described + aligner.notes() + step_notes),
        steps=tuple(s.step for s in steps),
        engine_nan_origin=f"{origin.module} (step {origin.step})" if origin is not None else None,
    )


def _describe_steps(steps: list[StepRecord]) -> str:
    prefill = [s for s in steps if len(s.positions) > 1 or s.positions[0] == 0]
    decode = len(steps) - len(prefill)
    parts = [f"prefill of {len(s.positions)} tokens" for s in prefill] + ([f"{decode} decode"] if decode else [])
    return ", ".join(parts)


__all__ = ["DerivedDump", "EngineAlignment", "align_engine_dump", "is_engine_dump"]
