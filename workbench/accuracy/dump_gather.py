"""The rank dumps of a tensor-parallel engine, read as one dump of the whole model.

A TP=N engine dump is N directories (`DIR/rank0` ... `DIR/rank<N-1>`), each holding its rank's part of
every recorded module output, and each manifest says how those parts make the whole
(`ascend_backend.vllm_plugin.shards`, from vLLM's layer types):

- replicated (norms, decoder layers, row-parallel outputs after their all-reduce, the embedding, the
  logits): every rank holds the whole tensor; rank 0's is taken, after checking that every rank's
  statistics agree with it (a module sharded in a way the layouts do not know fails that check and is
  left out by name instead of being compared wrongly);
- split (column-parallel: QKV, gate_up, attention, rotated q/k, the activation): the ranks' slices are
  concatenated along the last dimension, part by part, so fused outputs come out in TP=1 order
  ([q0 q1 | k0 k1 | v0 v1], not [q0 k0 v0 | q1 k1 v1]) and a replicated KV slice is taken once;
- partial (row-parallel recorded before its all-reduce): the ranks' tensors are summed in float32.

`GatheredDump` is a `WorkbenchDump` (same records, steps, header and `load`), so `compare_dumps` holds it
against a TP=1 engine dump name by name, or against a float32 reference through the engine alignment.
Tensors are gathered when loaded, one record at a time; statistics come from the ranks' own where
they determine the whole (replicated; split without replicas) and from the gathered tensor otherwise.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import torch

from workbench.accuracy.dump_format import (
    MANIFEST_FILE,
    DumpMode,
    DumpRecord,
    ShardKind,
    ShardLayout,
    TensorStats,
    WorkbenchDump,
)
from workbench.errors import WorkbenchError

REPLICA_TOLERANCE = 1e-3  # relative: all-reduced copies agree far closer than different shards ever do
_LISTED = 4


def rank_directories(directory: str | os.PathLike) -> list[Path]:
    """`directory/rank<R>` dumps, rank 0 first; [] when there are none."""
    found = [p.parent for p in Path(directory).glob("rank*/" + MANIFEST_FILE) if p.parent.name[4:].isdigit()]
    return sorted(found, key=lambda p: int(p.name[4:]))


def gather_split(shards: Sequence[torch.Tensor], layout: ShardLayout) -> torch.Tensor:
    """The ranks' slices [..., sum(parts)] -> the whole [..., sum(parts[i] * N / replicas[i])].

    Part i of rank r is slice r // replicas[i] of that part; the first rank of each replica group
    supplies it. Example (TP=2, parts (128, 64, 64), no replicas): [q0 k0 v0], [q1 k1 v1] -> [q0 q1 k0 k1 v0 v1].
    """
    pieces = [shard.split(list(layout.parts), dim=-1) for shard in shards]  # pieces[rank][part]
    whole = [pieces[rank][i] for i, replicas in enumerate(layout.replicas) for rank in range(0, len(shards), replicas)]
    return torch.cat(whole, dim=-1)


def combine_stats(stats: Sequence[TensorStats], sizes: Sequence[int]) -> TensorStats:
    """Statistics of a concatenation of disjoint slices, from each slice's statistics and element count."""
    values = [s for s in stats for s in (s.max, s.min, s.mean, s.norm)]
    if any(math.isnan(v) for v in values):
        return TensorStats(math.nan, math.nan, math.nan, math.nan)
    total = sum(sizes)
    return TensorStats(
        max(s.max for s in stats),
        min(s.min for s in stats),
        sum(s.mean * n for s, n in zip(stats, sizes, strict=True)) / total if total else math.nan,
        math.sqrt(sum(s.norm**2 for s in stats)),
    )


def stats_agree(a: TensorStats, b: TensorStats, tolerance: float = REPLICA_TOLERANCE) -> bool:
    """Whether two ranks' statistics describe the same tensor (NaN agrees with NaN)."""
    scale = max(abs(a.max), abs(a.min), abs(b.max), abs(b.min), 1e-30)
    for x, y, reach in (
        (a.max, b.max, scale),
        (a.min, b.min, scale),
        (a.mean, b.mean, scale),
        (a.norm, b.norm, max(a.norm, b.norm, 1e-30)),
    ):
        if math.isnan(x) or math.isnan(y):
            if not (math.isnan(x) and math.isnan(y)):
                return False
        elif abs(x - y) > tolerance * reach:
            return False
    return True


def _counts(tensor: torch.Tensor) -> tuple[int, int]:
    if not tensor.is_floating_point():
        return 0, 0
    return int(tensor.isnan().sum()), int(tensor.isinf().sum())


class GatheredDump(WorkbenchDump):
    """The rank dumps under `directory` as one dump (see the module docstring); `notes` says what was left out.

    A `WorkbenchDump` for every reader (records, steps, header, mode, `load`); it reads the ranks' own
    directories instead of a manifest of its own.
    """

    kind = "gathered"

    def __init__(self, directory: str | os.PathLike, ranks: Sequence[str | os.PathLike] | None = None) -> None:
        self.path = Path(directory)
        dirs = [Path(r) for r in ranks] if ranks is not None else rank_directories(self.path)
        if not dirs:
            raise WorkbenchError(f"{self.path} holds no rank<R>/{MANIFEST_FILE}: it is not a tensor-parallel dump")
        self.ranks = tuple(WorkbenchDump(d) for d in dirs)
        self._check_ranks()
        first = self.ranks[0]
        ops: dict[str, set[str]] = {}
        for rank in self.ranks:
            for module, names in rank.header.module_ops.items():
                ops.setdefault(module, set()).update(names)
        self.header = replace(
            first.header,
            device=f"{first.header.device} x{len(self.ranks)} ranks (gathered)",
            parallel=None,
            module_ops={m: tuple(sorted(o)) for m, o in ops.items()},
        )
        self.notes: list[str] = []
        self.steps = self._common_steps()
        self._sources: list[Callable[[], torch.Tensor]] = []
        self.records = self._gather()

    @property
    def tp_size(self) -> int:
        return len(self.ranks)

    def _check_ranks(self) -> None:
        infos = [r.header.parallel for r in self.ranks]
        if any(info is None for info in infos):
            raise WorkbenchError(
                f"the rank dumps under {self.path} carry no tensor-parallel layouts (captured by an older workbench); "
                "capture the engine dump again with this version"
            )
        size = len(self.ranks)
        if [info.tp_rank for info in infos] != list(range(size)) or any(info.tp_size != size for info in infos):
            found = ", ".join(f"{r.path.name}: rank {i.tp_rank} of {i.tp_size}" for r, i in zip(self.ranks, infos))
            raise WorkbenchError(
                f"{self.path} does not hold every rank of one tensor-parallel group ({found}); capture it again "
                "into a new directory"
            )
        if any(info.world_size != info.tp_size for info in infos):
            raise WorkbenchError(
                f"{self.path}: the engine ran {infos[0].world_size} ranks for TP={size} (pipeline or data parallel): "
                "ranks hold different layers or requests, and gathering covers tensor parallelism only; capture the "
                "dump with pipeline_parallel_size and data_parallel_size 1"
            )
        if len({r.mode for r in self.ranks}) != 1:
            raise WorkbenchError(f"the rank dumps under {self.path} mix stats-only and tensor captures")

    def _common_steps(self):
        """The steps every rank finished (a rank stopped mid-step leaves the others' later steps unmatched)."""
        count = min(len(r.steps) for r in self.ranks)
        first = self.ranks[0].steps[:count]
        for rank in self.ranks[1:]:
            if rank.steps[:count] != first:
                raise WorkbenchError(
                    f"{rank.path} recorded other steps (token ids or positions) than {self.ranks[0].path}; the ranks "
                    "of one engine run the same steps: capture the dump again"
                )
        if any(len(r.steps) > count for r in self.ranks):
            self.notes.append(f"steps after {count - 1} not gathered: not every rank finished them")
        return first

    def _gather(self) -> list[DumpRecord]:
        kept = {s.step for s in self.steps}
        by_key = [{(r.step, r.key): r for r in rank.records} for rank in self.ranks[1:]]
        layouts = self.ranks[0].header.parallel
        records: list[DumpRecord] = []
        left_out: dict[str, str] = {}
        for record in self.ranks[0].records:
            if record.step not in kept:
                continue
            others = [index.get((record.step, record.key)) for index in by_key]
            layout = layouts.layout(record.module, record.output_index)  # type: ignore[union-attr]
            made = self._one(record, others, layout)
            if isinstance(made, str):
                left_out.setdefault(record.module, made)
                continue
            gathered, source = made
            records.append(replace(gathered, index=len(records), file=None))
            self._sources.append(source)
        for module, why in list(left_out.items())[:_LISTED]:
            self.notes.append(f"not gathered: {module}: {why}")
        if len(left_out) > _LISTED:
            self.notes.append(f"not gathered: {len(left_out) - _LISTED} more modules")
        if not records:
            raise WorkbenchError(f"no record of {self.path} could be gathered: " + "; ".join(self.notes))
        return records

    def _one(self, record: DumpRecord, others: list[DumpRecord | None], layout: ShardLayout):
        """(the gathered record, its tensor source), or why the record cannot be gathered."""
        first_rank = self.ranks[0]
        if layout.kind is ShardKind.REPLICATED:
            bad = [
                self.ranks[i + 1].path.name
                for i, o in enumerate(others)
                if o is not None and (o.shape != record.shape or not stats_agree(o.stats, record.stats))
            ]
            if bad:
                return (
                    f"its output differs on {', '.join(bad)} although its layer type says every rank holds all of "
                    "it (a sharding the gatherer does not know)"
                )
            return record, lambda: first_rank.load(record)
        if any(o is None for o in others):
            return "not every rank recorded it"
        parts = [record, *others]
        if len({p.shape[:-1] for p in parts}) != 1 or len({p.dtype for p in parts}) != 1:
            return "the ranks recorded different shapes or dtypes"
        tensors = self.mode is DumpMode.TENSORS
        loads = [(rank, part) for rank, part in zip(self.ranks, parts, strict=True)]
        if layout.kind is ShardKind.PARTIAL:
            return (
                self._derived(record, loads, None, "partial sums")
                if tensors
                else ("a partial sum's statistics cannot be gathered from stats-only dumps")
            )
        if any(p.shape[-1] != sum(layout.parts) for p in parts):
            return f"its width {record.shape[-1]} is not the layout's parts {list(layout.parts)}"
        if any(self.tp_size % r for r in layout.replicas):
            return f"replica counts {list(layout.replicas)} do not divide TP={self.tp_size}"
        if set(layout.replicas) == {1}:
            width = sum(layout.parts) * self.tp_size
            size = [math.prod(p.shape) for p in parts]
            stats = combine_stats([p.stats for p in parts], size)
            shape = (*record.shape[:-1], width)
            merged = replace(
                record,
                shape=shape,
                stats=stats,
                nan_count=_total(p.nan_count for p in parts),
                inf_count=_total(p.inf_count for p in parts),
                inputs_nonfinite=_any(parts),
            )
            merged = replace(merged, nonfinite=bool((merged.nan_count or 0) + (merged.inf_count or 0)))
            return merged, lambda: gather_split([rank.load(part) for rank, part in loads], layout)
        if not tensors:
            return "replicated KV slices cannot be gathered from stats-only dumps"
        return self._derived(record, loads, layout, "split with replicas")

    def _derived(self, record: DumpRecord, loads, layout: ShardLayout | None, _what: str):
        """A record whose statistics need the gathered tensor (partial sums; slices with replicated parts)."""

        def source() -> torch.Tensor:
            shards = [rank.load(part) for rank, part in loads]
            if layout is None:  # partial sums, added in float32
                return torch.stack([s.float() for s in shards]).sum(0).to(shards[0].dtype)
            return gather_split(shards, layout)

        tensor = source()
        nans, infs = _counts(tensor)
        made = replace(
            record,
            shape=tuple(tensor.shape),
            stats=TensorStats.of(tensor),
            nan_count=nans,
            inf_count=infs,
            nonfinite=bool(nans or infs),
            inputs_nonfinite=_any([part for _, part in loads]),
        )
        return made, source

    def load(self, record: DumpRecord) -> torch.Tensor:
        return self._sources[record.index]()


def _total(values) -> int | None:
    values = list(values)
    return None if any(v is None for v in values) else sum(values)


def _any(records: Sequence[DumpRecord]) -> bool | None:
    flags = [r.inputs_nonfinite for r in records]
    return None if all(f is None for f in flags) else any(bool(f) for f in flags)


__all__ = ["GatheredDump", "combine_stats", "gather_split", "rank_directories", "stats_agree"]
