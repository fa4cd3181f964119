"""The adaptive search's decisions, driven through its `run_points` contract by a table of outcomes.

The table stands in for servers: which budgets start, and what each configuration measures. What is
tested is the search (order of trials, which budget is kept, which candidate wins under the SLO),
not any measured number.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from workbench.errors import WorkbenchError
from workbench.sweep.adaptive import candidates, search
from workbench.sweep.spec import load_base_recipe, load_sweep_spec
from workbench.sweep.store import PointResult, PointStatus

MIB = 2**20
SPEC = {
    "name": "a",
    "base": "cpu-tiny",
    "workload": {"input_len": 16, "output_len": 4, "num_prompts": 2, "concurrency": [2]},
    "slo": {"p99_ttft_ms": 300},
    "adaptive": {
        "kv_cache_memory_bytes": ["256MiB", "2GiB", "1GiB"],
        "max_num_seqs": [4, 16],
        "max_num_batched_tokens": [256, 1024],
    },
}
# (max_num_seqs, max_num_batched_tokens) -> (output_throughput, p99_ttft_ms)
MEASURES = {(16, 1024): (500.0, 400.0), (16, 256): (450.0, 250.0), (4, 1024): (300.0, 100.0), (4, 256): (280.0, 90.0)}


class Table:
    """A `run_points` that answers from MEASURES; budgets above `max_bytes` fail to start."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.calls: list[dict] = []

    def __call__(self, points):
        params = dict(points[0].params)
        self.calls.append(params)
        out = []
        for p in points:
            if params["kv_cache_memory_bytes"] > self.max_bytes:
                out.append(
                    PointResult(
                        p.point_id,
                        "a",
                        p.server_key,
                        params,
                        {"input_len": 16},
                        p.repeat,
                        PointStatus.START_FAILED,
                        crash={"kind": "out_of_memory"},
                    )
                )
                continue
            tput, ttft = MEASURES[(params["max_num_seqs"], params["max_num_batched_tokens"])]
            out.append(
                PointResult(
                    p.point_id,
                    "a",
                    p.server_key,
                    params,
                    {"input_len": 16, "concurrency": 2},
                    p.repeat,
                    PointStatus.OK,
                    summary={"output_throughput": tput, "p99_ttft_ms": ttft, "p99_e2el_ms": 1000.0},
                )
            )
        return out


@pytest.fixture
def spec(tmp_path: Path):
    path = tmp_path / "a.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    return load_sweep_spec(path)


def test_candidates_most_demanding_first(spec):
    assert candidates(spec.adaptive) == [
        {"max_num_seqs": 16, "max_num_batched_tokens": 1024},
        {"max_num_seqs": 16, "max_num_batched_tokens": 256},
        {"max_num_seqs": 4, "max_num_batched_tokens": 1024},
        {"max_num_seqs": 4, "max_num_batched_tokens": 256},
    ]


def test_largest_budget_that_starts_then_best_under_slo(spec):
    table = Table(max_bytes=1024 * MIB)
    outcome = search(spec, load_base_recipe(spec), table)
    assert [(t.value, t.started, t.crash_kind) for t in outcome.trials] == [
        (2048 * MIB, False, "out_of_memory"),
        (1024 * MIB, True, None),
    ]
    assert outcome.budget == 1024 * MIB
    # the probe's server (largest candidate) is the first candidate's measurement: no second start
    assert [
        (c["kv_cache_memory_bytes"] // MIB, c["max_num_seqs"], c["max_num_batched_tokens"]) for c in table.calls
    ] == [(2048, 16, 1024), (1024, 16, 1024), (1024, 16, 256), (1024, 4, 1024), (1024, 4, 256)]
    # (16, 1024) has the most throughput but misses the 300 ms TTFT SLO
    assert (outcome.best["max_num_seqs"], outcome.best["max_num_batched_tokens"]) == (16, 256)
    assert "max_num_seqs=16, max_num_batched_tokens=256" in outcome.summary()


def test_no_budget_starts(spec):
    outcome = search(spec, load_base_recipe(spec), Table(max_bytes=1))
    assert outcome.budget is None and outcome.best is None
    assert [t.value // MIB for t in outcome.trials] == [2048, 1024, 256]
    assert "none of" in outcome.summary()


def test_spec_without_adaptive_section(tmp_path):
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in SPEC.items() if k != "adaptive"}))
    spec = load_sweep_spec(path)
    with pytest.raises(WorkbenchError, match="--adaptive needs an 'adaptive:' section"):
        search(spec, load_base_recipe(spec), Table(0))


def test_adaptive_needs_exactly_one_budget_list(tmp_path):
    data = {**SPEC, "adaptive": {**SPEC["adaptive"], "gpu_memory_utilization": [0.9]}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(WorkbenchError, match="exactly one budget list"):
        load_sweep_spec(path)
