"""The sweep's results store: round trip, table, resume set; damage as the results log treats it."""

from __future__ import annotations

import json

import pytest

from workbench.results.jsonl import DamagedLineWarning
from workbench.sweep.store import PointResult, PointStatus, ResultStore, latencies_frame


def point(pid: str, throughput: float = 10.0, status: PointStatus = PointStatus.OK) -> PointResult:
    return PointResult(
        point_id=pid,
        sweep="s",
        server_key="k",
        params={"max_num_seqs": 4},
        workload={"input_len": 8, "output_len": 4, "concurrency": 2, "seed": 0},
        repeat=0,
        status=status,
        summary={"output_throughput": throughput},
        latencies={"ttft_ms": [1.0, 2.0]},
        server_pids=(11, 12),
    )


def test_append_read_round_trip(tmp_path):
    store = ResultStore(tmp_path / "r.jsonl")
    assert store.read() == [] and store.done_ids() == set()
    store.append(point("a"))
    store.append(point("b", 20.0, PointStatus.START_FAILED))
    assert store.read() == [point("a"), point("b", 20.0, PointStatus.START_FAILED)]
    assert store.done_ids() == {"a", "b"}
    assert store.path.read_bytes().count(b"\n") == 2
    frame = store.frame()
    assert list(frame["point_id"]) == ["a", "b"]
    assert list(frame["output_throughput"]) == [10.0, 20.0]
    assert list(frame["status"]) == ["ok", "start_failed"]
    assert "seed" not in frame.columns and list(frame["max_num_seqs"]) == [4, 4]


def test_a_damaged_point_is_kept_in_the_file_reported_and_measured_again(tmp_path):
    store = ResultStore(tmp_path / "r.jsonl")
    store.append(point("a"))
    with store.path.open("ab") as handle:
        handle.write(b'{"point_id": "b"}\n')  # JSON, but not a point: no status, no sweep
    store.append(point("c"))
    with pytest.warns(DamagedLineWarning, match=r"r\.jsonl: line 2 is damaged"):
        assert store.done_ids() == {"a", "c"}
    assert b'{"point_id": "b"}' in store.path.read_bytes()


def test_points_stored_with_the_old_fingerprint_key_read_their_provenance(tmp_path):
    store = ResultStore(tmp_path / "r.jsonl")
    old = {**point("a").to_dict(), "fingerprint": {"created_at": "2026-11-30T10:00:00+0000"}}
    del old["provenance"]
    store.path.write_text(json.dumps(old) + "\n")
    assert store.read()[0].provenance == {"created_at": "2026-11-30T10:00:00+0000"}


def test_latencies_frame_is_long(tmp_path):
    frame = latencies_frame([point("a"), point("b")], label_columns=("max_num_seqs",))
    assert list(frame.columns) == ["point_id", "max_num_seqs", "metric", "value"]
    assert frame["value"].tolist() == [1.0, 2.0, 1.0, 2.0]
    assert set(frame["metric"]) == {"ttft_ms"}
