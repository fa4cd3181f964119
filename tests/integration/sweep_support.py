"""What the parallel and Ray sweep tests share: one spec (two server configurations, two points each, the
tiny model on two groups of one core), the content a point's result must hold whatever the mode (derived
from the spec: ids, params, statuses, request and token counts; timings differ by nature), and the checks
on placements and leftover processes.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT
from tests.integration.conftest import CASE_VAR, processes_with_marker
from workbench.sweep.spec import SweepSpec, expand, load_sweep_spec
from workbench.sweep.store import PointStatus

MARKS = [
    pytest.mark.integration,
    pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two device groups need two cores"),
]

# 16 one-at-a-time requests of 32 tokens: a point lasts long enough that a kill sent when a
# configuration's first point arrives lands during its second
WORKLOAD = {"input_len": 16, "output_len": 32, "num_prompts": 16, "concurrency": [1], "warmup_requests": 1}


def new_sweep(tmp_path: Path, server_env: dict[str, str]) -> tuple[SweepSpec, dict[str, str]]:
    """The shared spec, written under `tmp_path`, and the session's server variables plus a new case marker
    (`wait_gone(env)` waits for exactly this sweep's processes)."""
    data = {
        "name": "par",
        "base": str(REPO_ROOT / "recipes" / "serving" / "cpu-tiny.yaml"),
        "grid": {"max_num_seqs": [2, 4], "kv_cache_memory_bytes": ["256MiB"]},
        "workload": WORKLOAD,
        "repeats": 2,
        "slo": {"p99_ttft_ms": 60000, "p99_e2el_ms": 120000},
    }
    path = tmp_path / "par.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_sweep_spec(path), {**server_env, CASE_VAR: uuid.uuid4().hex}


def _row(point_id, server_key, params: dict, repeat, status: str, completed, failed, tokens) -> tuple:
    return (point_id, server_key, tuple(sorted(params.items())), repeat, status, completed, failed, tokens)


def content(results) -> list[tuple]:
    """What must not depend on how the sweep ran: ids, params, statuses, request and token counts."""
    return sorted(
        _row(r.point_id, r.server_key, r.params, r.repeat, r.status.value, r.summary.get("completed"),
             r.summary.get("failed"), r.summary.get("total_output_tokens"))
        for r in results
    )  # fmt: skip


def expected_content(spec) -> list[tuple]:
    """content() of a sweep whose every point completed all its requests, from the spec alone."""
    requests, tokens = WORKLOAD["num_prompts"], WORKLOAD["num_prompts"] * WORKLOAD["output_len"]
    return sorted(
        _row(p.point_id, p.server_key, p.params_dict, p.repeat, PointStatus.OK.value, requests, 0, tokens)
        for p in expand(spec)
    )


def cluster_processes() -> set[int]:
    """Live raylet / gcs_server processes on this machine."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            name = (entry / "comm").read_text().strip() if entry.name.isdigit() else ""
        except OSError:
            continue
        if name in ("raylet", "gcs_server"):
            found.add(int(entry.name))
    return found


def wait_gone(env: dict[str, str], timeout_s: float = 40.0) -> list[int]:
    """Processes still alive that carry `env`'s case marker, after waiting up to `timeout_s` for none."""
    deadline = time.monotonic() + timeout_s
    while processes_with_marker(env[CASE_VAR], CASE_VAR) and time.monotonic() < deadline:
        time.sleep(0.3)
    return processes_with_marker(env[CASE_VAR], CASE_VAR)


def side_by_side_ok(results) -> None:
    """The two configurations ran on the two groups, and their servers were up at the same time."""
    windows = {}
    for r in results:
        windows.setdefault(r.placement["group"], r.placement["window"])
    assert sorted(windows) == ["cpu:0", "cpu:1"]
    (a0, a1), (b0, b1) = windows.values()
    assert max(a0, b0) < min(a1, b1), "the two servers were expected to run at the same time"


def points_beside_the_other_group(results) -> int:
    """Points whose window overlaps the window of some point of the other group, from the placements."""

    def overlaps(a, b) -> bool:
        return max(a[0], b[0]) < min(a[1], b[1])

    return sum(
        any(o.placement["group"] != r.placement["group"] and overlaps(r.placement["window"], o.placement["window"])
            for o in results)
        for r in results
    )  # fmt: skip
