"""Result files for the regress tests, written by the load generator's own classes (so the format is the
real one), with a chosen throughput and TTFT and an editable fingerprint; and a private data directory."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from workbench.serving.load.client import RequestRecord
from workbench.serving.load.metrics import LoadResult, summarize
from workbench.serving.load.workload import Workload
from workbench.stack.provenance import stack

WORKLOAD = Workload(input_len=64, output_len=32, num_prompts=16, concurrency=8)


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Baselines go to a per-test directory, never to the user's ~/.local/share."""
    directory = tmp_path / "data"
    monkeypatch.setenv("ASCEND_WORKBENCH_DATA", str(directory))
    return directory


def fingerprint(**changes: Any) -> dict[str, Any]:
    """A provenance record of this machine's stack with dotted-key edits ('cann.toolkit': '8.2.RC1')."""
    record = {"created_at": "2026-12-01T10:00:00+0000", "stack": copy.deepcopy(stack()), "device": "cpu"}
    for dotted, value in changes.items():
        target = record
        *parents, last = dotted.split(".")
        for part in parents:
            target = target.setdefault(part, {})
        target[last] = value
    return record


def bench_result(
    throughput: float, ttft_ms: float = 50.0, *, workload: Workload = WORKLOAD, meta: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A bench JSON document whose output throughput is `throughput` tok/s and every TTFT `ttft_ms`."""
    n, out = workload.num_prompts, workload.output_len
    duration = n * out / throughput
    records = [
        RequestRecord(
            index=i,
            sent_s=0.0,
            prompt_tokens=workload.input_len,
            output_tokens=out,
            ttft_s=ttft_ms / 1000.0,
            e2el_s=ttft_ms / 1000.0 + 0.5,
            itl_s=(0.5 / (out - 1),) * (out - 1),
            success=True,
        )
        for i in range(n)
    ]
    result = LoadResult(workload, tuple(records), summarize(records, duration), meta or fingerprint())
    return json.loads(json.dumps(result.to_dict(), default=str))


def write_bench(path: Path, throughput: float, ttft_ms: float = 50.0, **kwargs: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(bench_result(throughput, ttft_ms, **kwargs)))
    return path


def tree_snapshot(root: Path) -> dict[str, bytes]:
    """Every file under `root` with its bytes: 'nothing stored changed' is equality of two snapshots."""
    return (
        {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
        if root.exists()
        else {}
    )
