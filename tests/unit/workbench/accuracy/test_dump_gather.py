"""Rank dumps of a tensor-parallel engine read as one dump (workbench.accuracy.dump_gather).

The rank dumps are written here from whole tensors cut the way each layout says (the layouts themselves
are checked against vLLM's own layers in tests/unit/ascend_backend/vllm_plugin/test_shards.py), so every
gathered tensor must equal the whole one exactly, statistics included, and a TP=1 dump of the whole
tensors must compare as identical. What cannot be gathered is refused or left out by name.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from ascend_backend.dump_format import (
    SOURCE_ENGINE,
    DumpHeader,
    DumpMode,
    DumpWriter,
    ParallelInfo,
    ShardKind,
    ShardLayout,
    StepRecord,
    TensorStats,
)
from workbench.accuracy.dump import open_dump
from workbench.accuracy.dump_compare import compare_dumps
from workbench.accuracy.dump_gather import GatheredDump, combine_stats, gather_split, stats_agree
from workbench.errors import WorkbenchError

IDS = (3, 1, 4, 1, 5)
QKV = ShardLayout(ShardKind.SPLIT, (4, 2, 2), (1, 1, 1))  # per rank: 4 q | 2 k | 2 v
QKV_REPLICATED_KV = ShardLayout(ShardKind.SPLIT, (4, 2, 2), (1, 2, 2))  # 1 KV head shared by both ranks
PARTIAL = ShardLayout(ShardKind.PARTIAL)
PREFILL = (StepRecord(0, IDS, tuple(range(5))),)


def whole_tensors() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "norm": torch.randn(5, 6, generator=g),  # replicated
        "qkv_proj": torch.randn(5, 16, generator=g),  # [q 8 | k 4 | v 4], split over 2 ranks
        "qkv_kv1": torch.randn(5, 12, generator=g),  # [q 8 | k 2 | v 2], the KV head held by both ranks
        "o_proj": torch.randn(5, 6, generator=g),  # partial sums before the all-reduce
    }


def rank_slices(name: str, whole: torch.Tensor, rank: int) -> torch.Tensor:
    if name == "qkv_proj":
        q, k, v = whole.split([8, 4, 4], dim=-1)
        return torch.cat(
            [q[:, 4 * rank : 4 * rank + 4], k[:, 2 * rank : 2 * rank + 2], v[:, 2 * rank : 2 * rank + 2]], -1
        )
    if name == "qkv_kv1":
        q, k, v = whole.split([8, 2, 2], dim=-1)
        return torch.cat([q[:, 4 * rank : 4 * rank + 4], k, v], dim=-1)
    if name == "o_proj":  # two partial sums that add up to the whole
        part = whole * 0.25 if rank == 0 else whole * 0.75
        return part
    return whole.clone()


LAYOUTS = {"qkv_proj": (QKV,), "qkv_kv1": (QKV_REPLICATED_KV,), "o_proj": (PARTIAL,)}


def write_rank(
    out, rank: int, size: int, tensors: dict, *, mode=DumpMode.TENSORS, layouts=LAYOUTS, world=None, steps=PREFILL
) -> None:
    parallel = ParallelInfo(rank, size, world or size, dict(layouts))
    header = DumpHeader(
        mode,
        IDS,
        None,
        "tiny",
        "cpu",
        ("*",),
        source=SOURCE_ENGINE,
        parallel=parallel,
        module_ops={"norm": ("rms_norm",)} if rank == 0 else {"qkv_proj": ()},
    )
    writer = DumpWriter(out, header)
    for step in steps:
        writer.add_step(step)
        for name, whole in tensors.items():
            writer.add(name, 0, 0, rank_slices(name, whole, rank), False, step=step.step)
        writer.checkpoint()
    writer.finish()


def write_single(out, tensors: dict) -> None:
    header = DumpHeader(DumpMode.TENSORS, IDS, None, "tiny", "cpu", ("*",), source=SOURCE_ENGINE)
    writer = DumpWriter(out, header)
    writer.add_step(StepRecord(0, IDS, tuple(range(5))))
    for name, whole in tensors.items():
        writer.add(name, 0, 0, whole, False, step=0)
    writer.finish()


@pytest.fixture
def tp2(tmp_path):
    tensors = whole_tensors()
    for rank in range(2):
        write_rank(tmp_path / "tp2" / f"rank{rank}", rank, 2, tensors)
    return tmp_path / "tp2", tensors


def test_gather_split_reorders_fused_parts_and_takes_replicated_slices_once():
    ranks = [torch.tensor([[1.0, 2, 10, 20]]), torch.tensor([[3.0, 4, 10, 20]])]  # [q_r | kv shared]
    shared = ShardLayout(ShardKind.SPLIT, (2, 2), (1, 2))
    assert gather_split(ranks, shared).tolist() == [[1, 2, 3, 4, 10, 20]]
    own = ShardLayout(ShardKind.SPLIT, (2, 2), (1, 1))
    assert gather_split(ranks, own).tolist() == [[1, 2, 3, 4, 10, 20, 10, 20]]


def test_every_gathered_tensor_equals_the_whole_with_its_statistics(tp2):
    directory, tensors = tp2
    dump = open_dump(directory)
    assert isinstance(dump, GatheredDump) and dump.tp_size == 2 and dump.notes == []
    assert [r.module for r in dump.records] == list(tensors)
    for record in dump.records:
        whole = tensors[record.module]
        torch.testing.assert_close(dump.load(record), whole, rtol=0, atol=1e-6)
        assert record.shape == tuple(whole.shape)
        expected = TensorStats.of(whole)
        for got, want in zip(vars(record.stats).values(), vars(expected).values(), strict=True):
            assert got == pytest.approx(want, rel=1e-9, abs=1e-9)
    assert dump.header.module_ops == {"norm": ("rms_norm",), "qkv_proj": ()}
    assert "x2 ranks (gathered)" in dump.header.device and dump.steps[0].token_ids == IDS


def test_the_gathered_dump_compares_as_identical_with_a_tp1_dump_of_the_whole_tensors(tp2, tmp_path):
    directory, tensors = tp2
    write_single(tmp_path / "tp1", tensors)
    summary = compare_dumps(directory, tmp_path / "tp1").summary
    assert (summary.compared, summary.errors, summary.warnings) == (4, 0, 0)
    assert summary.worst_cosine == pytest.approx(1.0, abs=1e-6)


def test_a_module_whose_ranks_differ_although_unlisted_is_left_out_by_name(tmp_path):
    tensors = whole_tensors()
    tensors["q_norm"] = torch.randn(5, 4)  # a per-head norm on sharded heads: the ranks hold different data
    for rank in range(2):
        shifted = {**tensors, "q_norm": tensors["q_norm"] + rank}
        write_rank(tmp_path / f"rank{rank}", rank, 2, shifted)
    dump = GatheredDump(tmp_path)
    assert "q_norm" not in {r.module for r in dump.records}
    assert any("q_norm" in note and "does not know" in note for note in dump.notes)
    write_single(tmp_path / "one", tensors)
    summary = compare_dumps(dump, tmp_path / "one", allow_missing=True).summary
    assert any("q_norm" in note for note in summary.mapping)


def test_stats_only_ranks_gather_what_their_statistics_determine(tmp_path):
    tensors = whole_tensors()
    for rank in range(2):
        write_rank(tmp_path / f"rank{rank}", rank, 2, tensors, mode=DumpMode.STATS)
    dump = GatheredDump(tmp_path)
    assert {r.module for r in dump.records} == {"norm", "qkv_proj"}  # partial sums and replicas need tensors
    qkv = next(r for r in dump.records if r.module == "qkv_proj")
    assert qkv.stats.norm == pytest.approx(float(tensors["qkv_proj"].double().norm()), rel=1e-9)
    assert len(dump.notes) == 2


def test_combine_stats_and_replica_agreement():
    a, b = torch.randn(3, 4), torch.randn(3, 2)
    combined = combine_stats([TensorStats.of(a), TensorStats.of(b)], [12, 6])
    whole = TensorStats.of(torch.cat([a, b], dim=-1))
    assert combined.mean == pytest.approx(whole.mean) and combined.norm == pytest.approx(whole.norm)
    assert (combined.max, combined.min) == (whole.max, whole.min)
    assert math.isnan(combine_stats([TensorStats(math.nan, 0, 0, 0), whole], [1, 1]).max)
    assert stats_agree(whole, whole) and not stats_agree(TensorStats.of(a), TensorStats.of(a + 0.1))
    nan = TensorStats(math.nan, math.nan, math.nan, math.nan)
    assert stats_agree(nan, nan) and not stats_agree(nan, whole)


def test_a_pipeline_parallel_engine_and_a_missing_rank_are_refused(tmp_path):
    tensors = whole_tensors()
    for rank in range(2):
        write_rank(tmp_path / "pp" / f"rank{rank}", rank, 2, tensors, world=4)
    with pytest.raises(WorkbenchError, match="tensor parallelism only"):
        GatheredDump(tmp_path / "pp")
    write_rank(tmp_path / "half" / "rank0", 0, 2, tensors)
    with pytest.raises(WorkbenchError, match="does not hold every rank"):
        GatheredDump(tmp_path / "half")


def test_old_rank_dumps_without_layouts_say_to_capture_again(tmp_path):
    tensors = whole_tensors()
    for rank in range(2):
        write_rank(tmp_path / f"rank{rank}", rank, 2, tensors)
        manifest = tmp_path / f"rank{rank}" / "manifest.json"
        raw = json.loads(manifest.read_text())
        del raw["parallel"]
        manifest.write_text(json.dumps(raw))
    with pytest.raises(WorkbenchError, match="older workbench"):
        open_dump(tmp_path)


def test_ranks_that_ran_different_steps_are_refused_and_an_unfinished_step_is_dropped(tmp_path):
    tensors = {"norm": torch.randn(1, 6)}
    one = (StepRecord(0, IDS, tuple(range(5))),)
    two = (*one, StepRecord(1, (9,), (5,)))
    write_rank(tmp_path / "ok" / "rank0", 0, 2, tensors, steps=two)
    write_rank(tmp_path / "ok" / "rank1", 1, 2, tensors, steps=one)
    dump = GatheredDump(tmp_path / "ok")
    assert [s.step for s in dump.steps] == [0] and {r.step for r in dump.records} == {0}
    assert any("not every rank finished" in n for n in dump.notes)
    write_rank(tmp_path / "bad" / "rank0", 0, 2, tensors, steps=one)
    write_rank(tmp_path / "bad" / "rank1", 1, 2, tensors, steps=(StepRecord(0, (7,) * 5, tuple(range(5))),))
    with pytest.raises(WorkbenchError, match="other steps"):
        GatheredDump(tmp_path / "bad")
