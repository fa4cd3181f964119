"""One window's pieces (`twin.perf.windows`, `twin.perf.request`): the engine's histograms, the prompts, the record."""

from __future__ import annotations

import json

import pytest

from workbench.errors import WorkbenchError
from workbench.recipes import load_serving_recipe
from workbench.serving.prometheus import parse_prometheus
from workbench.twin.perf.request import PerfTwinRequest, PerfWorkload, ProfileWindow
from workbench.twin.perf.windows import (
    WINDOW_KIND,
    RequestTiming,
    WindowRecord,
    engine_means,
    prompts_for,
    step_clock,
    typical_step_s,
    window_step_s,
)
from workbench.twin.sides import Side

BEFORE = """# HELP vllm:request_queue_time_seconds Histogram of time spent in WAITING phase for request.
vllm:request_queue_time_seconds_sum{engine="0",model_name="tiny"} 1.5
vllm:request_queue_time_seconds_count{engine="0",model_name="tiny"} 10.0
vllm:request_prefill_time_seconds_sum{engine="0",model_name="tiny"} 2.0
vllm:request_prefill_time_seconds_count{engine="0",model_name="tiny"} 10.0
"""
AFTER = """vllm:request_queue_time_seconds_sum{engine="0",model_name="tiny"} 3.1
vllm:request_queue_time_seconds_count{engine="0",model_name="tiny"} 26.0
vllm:request_prefill_time_seconds_sum{engine="0",model_name="tiny"} 2.8
vllm:request_prefill_time_seconds_count{engine="0",model_name="tiny"} 26.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="tiny"} 9.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="tiny"} 26.0
"""


def test_the_engine_means_cover_exactly_the_requests_between_two_scrapes():
    means = engine_means(parse_prometheus(BEFORE), parse_prometheus(AFTER))
    assert means == {"queue": pytest.approx(1.6 / 16), "prefill": pytest.approx(0.8 / 16)}  # ttft: not in BEFORE
    assert engine_means(None, parse_prometheus(AFTER)) == {}  # an attached server without /metrics


def test_the_prompts_interleave_the_classes_at_their_exact_lengths():
    from workbench.embedded_models.catalog import prepare
    from workbench.serving.load.workload import load_tokenizer

    tokenizer = load_tokenizer(prepare("tiny"))
    prompts = prompts_for(tokenizer, PerfWorkload(input_lens=(16, 48), num_prompts=5))
    assert [p.num_tokens for p in prompts] == [16, 48, 16, 48, 16]
    assert len({p.text for p in prompts}) == 5


def test_the_client_clock_merges_a_steps_arrivals_into_one():
    # step_clock's worked example: two requests, tokens 20 ms apart, arriving within half a millisecond
    timings = (
        RequestTiming("in64", 0.100, 0.02, True, 0.0, (0.020, 0.020)),
        RequestTiming("in64", 0.0904, 0.02, True, 0.010, (0.0199,)),
    )
    assert step_clock(timings) == pytest.approx([0.100, 0.120, 0.140])
    assert window_step_s(timings, 0, 2) == pytest.approx(0.020) and window_step_s(timings, 1, 5) is None


def test_a_window_record_round_trips_with_its_kind():
    timing = RequestTiming("in64", 0.02, 0.01, True, 0.5, (0.01, 0.012))
    record = WindowRecord("B", 2, (timing,), (), {"queue": 0.001}, None, None, 3.5)
    stored = json.loads(json.dumps(record.to_dict()))
    assert WINDOW_KIND.matches(stored) and WindowRecord.from_dict(stored) == record and record.name == "B2"


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: PerfWorkload(input_lens=()), "one or more prompt lengths"),
        (lambda: PerfWorkload(input_lens=(64, 64)), "no repeats"),
        (lambda: PerfWorkload(output_len=1), "at least 2 output tokens"),
        (lambda: PerfWorkload(input_lens=(8, 16, 32), num_prompts=2), "one request per class"),
        (lambda: ProfileWindow(max_steps=1), "--profile-steps"),
        (lambda: ProfileWindow(delay_steps=-1), "--profile-delay"),
    ],
)
def test_bad_loads_and_windows_name_the_flag(make, words):
    with pytest.raises(WorkbenchError, match=words):
        make()


def test_a_twin_needs_a_repeat_and_its_sides_in_order():
    recipe = load_serving_recipe("cpu-tiny")
    a, b = Side.of_recipe("A", recipe), Side.of_recipe("B", recipe)
    with pytest.raises(WorkbenchError, match="the noise is measured, not assumed"):
        PerfTwinRequest(a, b, repeats=0)
    with pytest.raises(WorkbenchError, match="side A first"):
        PerfTwinRequest(b, a)
    assert PerfTwinRequest(a, b).windows_per_side == 3
    assert ProfileWindow(4, 32).body("perf-x-A0") == {
        "profile_prefix": "perf-x-A0",
        "delay_iterations": 4,
        "max_iterations": 32,
    }


def test_the_typical_step_leaves_out_a_stall_the_mean_tpot_keeps():
    gaps = (0.010,) * 9 + (0.200,) + (0.010,) * 9  # one 200 ms stall among 10 ms steps
    timings = tuple(RequestTiming("in64", 0.05, sum(gaps) / 19, True, 0.0001 * i, gaps) for i in range(3))
    assert typical_step_s(timings, 3.0) == pytest.approx(0.010)
    assert timings[0].tpot_s == pytest.approx(0.020)  # vLLM's TPOT: every token counted


def test_other_works_share_of_the_machine_leaves_out_our_own_ticks():
    from workbench.twin.perf.contention import CpuSample, others_share, sample

    before, after = CpuSample(busy=1000, total=4000, ours=300), CpuSample(busy=1800, total=6000, ours=700)
    assert others_share(before, after) == pytest.approx((800 - 400) / 2000)  # 20% of the cores were others'
    assert others_share(before, None) is None and others_share(after, before) is None
    now = sample(None)
    assert now is not None and now.total >= now.busy >= 0 and now.ours >= 0  # this process, on Linux


def test_a_contended_window_is_measured_again_and_the_least_contended_attempt_kept(monkeypatch):
    from workbench.twin.perf import run as perf_run

    shares = iter([0.9, 0.5])  # max_others_cpu 0.3, two attempts in all: neither passes, 0.5 is kept
    made = []

    def measure(target, index, request, directory, progress, attempt):
        made.append(index)
        return WindowRecord("A", index, (), (), {}, None, None, 1.0, next(shares))

    monkeypatch.setattr(perf_run, "measure_window", measure)
    recipe = load_serving_recipe("cpu-tiny")
    request = PerfTwinRequest(Side.of_recipe("A", recipe), Side.of_recipe("B", recipe))
    kept = perf_run._least_contended(None, 0, request, None, False)
    assert (kept.others_cpu, kept.attempts, made) == (0.5, 2, [0, 0])
    shares = iter([0.1])
    assert perf_run._least_contended(None, 1, request, None, False).attempts == 1  # quiet: measured once
