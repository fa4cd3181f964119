"""torch.profiler traces of vLLM workers: a constructed two-step trace with every number worked by hand.

Layout of the constructed trace (µs; vLLM's names, see workbench.profiling.torch_trace):

    step 0  execute_context_2(128)_generation_0(0)   [0, 1000)     next step starts at 1200
              gpu_model_runner: preprocess            [10, 90)
                aten::copy_ [20, 60)                  (input preparation: host work, as on a GPU)
              gpu_model_runner: forward               [100, 800)
                aten::linear [120, 400) > aten::mm [130, 390)
                _C::shm_allreduce [400, 500)
                aten::add [500, 700)
              gpu_model_runner: postprocess           [800, 840)
                aten::mm [805, 835)                   (compute_logits: a kernel on a GPU, so Computing)
              aten::argmax [850, 900)                 (in no device-work scope: host time)
    step 1  execute_context_0(0)_generation_2(2)     [1200, 1900)
              gpu_model_runner: forward               [1250, 1700)
                aten::mm [1260, 1500), _C::shm_allreduce [1500, 1560)

Step 0: window 1200, computing 280 + 200 + 30 = 510, communication 100, free 590.
Step 1: window 700, computing 240, communication 60, free 400.
"""

from __future__ import annotations

import gzip
import json

import pytest

from workbench.errors import WorkbenchError
from workbench.profiling.chrome_trace import read_trace
from workbench.profiling.read import read_profile
from workbench.profiling.torch_trace import BETWEEN_STEPS, read_torch_traces, step_phase

BASE = 1_733_000_000_000.0


def _x(name, start, end, cat="cpu_op", tid=7):
    return {"ph": "X", "cat": cat, "name": name, "pid": 42, "tid": tid, "ts": BASE + start, "dur": end - start}


EVENTS = [
    _x("execute_context_2(128)_generation_0(0)", 0, 1000, "user_annotation"),
    _x("gpu_model_runner: preprocess", 10, 90, "user_annotation"),
    _x("aten::copy_", 20, 60),
    _x("gpu_model_runner: forward", 100, 800, "user_annotation"),
    _x("aten::linear", 120, 400),
    _x("aten::mm", 130, 390),
    _x("_C::shm_allreduce", 400, 500),
    _x("aten::add", 500, 700),
    _x("gpu_model_runner: postprocess", 800, 840, "user_annotation"),
    _x("aten::mm", 805, 835),
    _x("aten::argmax", 850, 900),
    _x("execute_context_0(0)_generation_2(2)", 1200, 1900, "user_annotation"),
    _x("gpu_model_runner: forward", 1250, 1700, "user_annotation"),
    _x("aten::mm", 1260, 1500),
    _x("_C::shm_allreduce", 1500, 1560),
    {"ph": "M", "name": "process_name", "pid": 42, "args": {"name": "python"}},
    {"ph": "i", "name": "an instant event is ignored", "pid": 42, "tid": 7, "ts": BASE},
]


def write_trace(path, events=EVENTS, rank=None, compress=True):
    data = {"schemaVersion": 1, "traceEvents": events}
    if rank is not None:
        data = {
            "schemaVersion": 1,
            "distributedInfo": {"backend": "gloo", "rank": rank, "world_size": 2},
            "traceEvents": events,
        }
    raw = json.dumps(data).encode()
    path.write_bytes(gzip.compress(raw) if compress else raw)
    return path


def test_steps_are_split_by_hand(tmp_path):
    path = write_trace(tmp_path / "dp0_pp0_tp1_dcp0_ep0_rank1.1733000000000.pt.trace.json.gz")
    profile = read_torch_traces([path])
    assert profile.device == "cpu" and "worker's compute" in profile.mapping
    first, second = profile.steps
    assert first.rank == "1"  # from the worker name in the file name
    assert (first.computing_us, first.communication_not_overlapped_us, first.free_us) == (510, 100, 590)
    assert first.overlapped_us == 0  # a blocking CPU collective is never hidden
    assert (second.computing_us, second.communication_not_overlapped_us, second.free_us) == (240, 60, 400)
    assert (first.phase, second.phase) == ("prefill", "decode")


def test_self_times_and_kinds(tmp_path):
    profile = read_torch_traces([write_trace(tmp_path / "w.pt.trace.json.gz")])
    ops = {o.name: o for o in profile.ops}
    assert ops["aten::mm"].calls == 3 and ops["aten::mm"].self_us == 260 + 30 + 240
    assert ops["aten::linear"].self_us == 280 - 260  # its child aten::mm excluded
    assert ops["_C::shm_allreduce"].kind == "collective" and ops["_C::shm_allreduce"].communication
    assert ops["aten::add"].kind == "aten"
    assert "gpu_model_runner: forward" not in ops  # scopes are host phases, not ops


def test_host_phases(tmp_path):
    profile = read_torch_traces([write_trace(tmp_path / "w.pt.trace.json.gz")])
    host = {h.phase: h for h in profile.host}
    assert host["gpu_model_runner: forward"].total_us == 700 + 450 and host["gpu_model_runner: forward"].calls == 2
    assert host[BETWEEN_STEPS].total_us == 200  # step 0's annotation ends at 1000, step 1 starts at 1200


def test_rank_from_distributed_info_wins_and_plain_json_reads(tmp_path):
    path = write_trace(tmp_path / "worker.pt.trace.json", rank=3, compress=False)
    assert read_torch_traces([path]).ranks == ["3"]


def test_without_vllms_scopes_the_step_annotation_bounds_compute(tmp_path):
    events = [e for e in EVENTS if not str(e.get("name")).startswith("gpu_model_runner: ")]
    profile = read_torch_traces([write_trace(tmp_path / "w.pt.trace.json.gz", events)])
    first = profile.steps[0]
    assert first.computing_us == 510 + 40 + 50  # the input copy and the argmax are inside the step annotation
    assert any("VLLM_CUSTOM_SCOPES_FOR_PROFILING" in n for n in profile.notes)


def test_a_trace_without_vllm_steps_says_so(tmp_path):
    events = [_x("aten::mm", 0, 10)]
    profile = read_profile(write_trace(tmp_path / "w.pt.trace.json.gz", events))
    assert profile.steps == () and any("no vLLM step annotations" in n for n in profile.notes)


def test_truncated_gzip_is_one_clear_error(tmp_path):
    path = write_trace(tmp_path / "w.pt.trace.json.gz")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(WorkbenchError, match="truncated"):
        read_trace(path)


def test_step_phase_names():
    assert step_phase("execute_context_1(64)_generation_3(3)") == "mixed"
    assert step_phase("execute_context_0(0)_generation_0(0)") == ""
    assert step_phase("something else") == ""


def test_cuda_kernels_are_the_device_time(tmp_path):
    events = [
        _x("execute_context_0(0)_generation_4(4)", 0, 1000, "user_annotation"),
        _x("ampere_sgemm_128x64", 100, 400, "kernel", tid=3),
        _x("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 300, 500, "kernel", tid=4),
        _x("aten::mm", 90, 110),
    ]
    profile = read_torch_traces([write_trace(tmp_path / "w.pt.trace.json.gz", events)])
    (step,) = profile.steps
    assert profile.device == "cuda"
    assert (step.computing_us, step.overlapped_us, step.communication_not_overlapped_us, step.free_us) == (
        300,
        100,
        100,
        600,
    )
    assert {o.name for o in profile.ops} == {"ampere_sgemm_128x64", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"}


def test_self_times_on_a_random_call_tree_match_its_construction(tmp_path):
    """Nested calls on two threads built from a random tree: each call's self time is known by
    construction (its duration minus its children's), whatever the vectorised nesting computes."""
    import numpy as np

    from workbench.profiling.torch_trace import OP_CATEGORIES, _category_mask, self_times

    rng = np.random.default_rng(7)
    events, expected = [], {}

    def call(start, length, depth, tid):
        name = f"op{len(events)}"
        events.append(_x(name, start, start + length, tid=tid))
        children, cursor = 0.0, start + 1
        while depth < 4 and cursor < start + length - 4 and rng.random() < 0.7:
            size = float(rng.integers(1, max(2, int(start + length - cursor - 2))))
            call(cursor, size, depth + 1, tid)
            children += size
            cursor += size + float(rng.integers(0, 3))
        expected[name] = length - children

    for tid in (1, 2):
        call(0.0, 5000.0, 0, tid)
    table = read_trace(write_trace(tmp_path / "t.pt.trace.json.gz", events))
    selftime = self_times(table, _category_mask(table, OP_CATEGORIES))
    got = {table.names[i]: s for i, s in zip(table.name_id, selftime)}
    assert len(expected) > 20 and got == pytest.approx(expected)


def test_torch_compile_inside_the_window_is_host_time_with_its_own_verdict(tmp_path):
    """A compile of a new shape inside the forward (vLLM's worker called torch.compile mid-window):
    its time leaves Computing, shows as a host phase, and the COMPILATION verdict names it."""
    from workbench.profiling.torch_trace import COMPILING
    from workbench.profiling.verdicts import ProfileFindingKind, judge

    compile_events = [
        _x("entire_frame_compile", 520, 680, "user_annotation"),
        _x("compile_file (dynamo_timed)", 530, 670),
    ]
    profile = read_torch_traces([write_trace(tmp_path / "w.pt.trace.json.gz", EVENTS + compile_events)])
    first = profile.steps[0]
    assert first.computing_us == 510 - 160  # aten::add [500, 700) loses the compile's [520, 680)
    assert {h.phase: h.total_us for h in profile.host}[COMPILING] == 160
    kinds = {o.name: o.kind for o in profile.ops}
    assert kinds["compile_file (dynamo_timed)"] == "torch.compile (compiling)"
    compilation = [v for v in judge(profile) if v.kind is ProfileFindingKind.COMPILATION]
    assert compilation and "compiled for 0.2 ms inside the window" in compilation[0].evidence


def _union(pairs):
    merged = []
    for a, b in sorted(pairs):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


def _overlap(a_set, b_set):
    return sum(max(0.0, min(b, d) - max(a, c)) for a, b in a_set for c, d in b_set)


def test_a_real_vllm_cpu_tp2_capture(fixtures):
    """Four engine steps of each rank of a real TP=2 capture of the tiny model (SOURCES.md), recomputed
    here in plain Python from the JSON: Computing = ops starting inside the forward, postprocess (logits) or
    sample scope, collectives out."""
    directory = fixtures / "vllm_cpu_tp2"
    profile = read_profile(directory)
    assert profile.ranks == ["0", "1"] and profile.device == "cpu"
    for path in sorted(directory.glob("*.gz")):
        rank = path.name.split("rank")[1][0]
        events = [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"] if e.get("ph") == "X"]
        span = lambda e: (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))  # noqa: E731
        work = ("gpu_model_runner: forward", "gpu_model_runner: postprocess", "gpu_model_runner: sample")
        forward = _union(span(e) for e in events if e["name"] in work)
        ops = [e for e in events if e.get("cat") == "cpu_op"]
        collective = _union(span(e) for e in ops if e["name"].startswith(("c10d::", "gloo:")))
        inside = [
            span(e)
            for e in ops
            if not e["name"].startswith(("c10d::", "gloo:")) and any(a <= float(e["ts"]) < b for a, b in forward)
        ]
        compute = _union(inside)
        steps = sorted(float(e["ts"]) for e in events if e["name"].startswith("execute_context_"))
        last = max(
            span(e)[1] for e in events if e["name"].startswith("execute_context_") and float(e["ts"]) == steps[-1]
        )
        window = [(steps[0], last)]
        expected_compute = _overlap(compute, window) - _overlap(
            _union([(max(a, c), min(b, d)) for a, b in compute for c, d in collective if min(b, d) > max(a, c)]), window
        )
        ranks = profile.ranks_frame().set_index("rank")
        assert ranks.loc[rank, "computing_us"] == pytest.approx(expected_compute, rel=1e-6)
        assert ranks.loc[rank, "communication_us"] == pytest.approx(_overlap(collective, window), rel=1e-6)
        assert ranks.loc[rank, "total_us"] == pytest.approx(last - steps[0], abs=0.01)
    collectives = {(o.rank, o.name) for o in profile.ops if o.communication}
    assert {("0", "c10d::allreduce_"), ("1", "c10d::allreduce_")} <= collectives
    phases = [s.phase for s in profile.steps]
    assert set(phases) <= {"prefill", "decode", "mixed"} and all(phases)
