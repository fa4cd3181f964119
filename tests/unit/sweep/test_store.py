"""The results store: whole lines only, a torn tail is ignored and cut, resume sets are exact."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal

import pytest

from workbench.errors import WorkbenchError
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


def test_torn_last_line_is_ignored_then_cut_before_the_next_append(tmp_path):
    store = ResultStore(tmp_path / "r.jsonl")
    store.append(point("a"))
    whole = json.dumps(point("b").to_json()).encode()
    with store.path.open("ab") as handle:
        handle.write(whole[: len(whole) // 2])  # a write cut short by a kill
    assert store.done_ids() == {"a"}
    store.append(point("c"))
    assert [r.point_id for r in store.read()] == ["a", "c"]
    assert b'"point_id":"b"' not in store.path.read_bytes().replace(b" ", b"")


def test_only_line_torn(tmp_path):
    store = ResultStore(tmp_path / "r.jsonl")
    store.path.write_bytes(b'{"point_id": "x", "sta')
    assert store.read() == []
    store.append(point("y"))
    assert store.done_ids() == {"y"}
    assert store.path.read_bytes().startswith(b'{"point_id":"y"')


def test_corrupt_middle_line_names_file_and_line(tmp_path):
    store = ResultStore(tmp_path / "r.jsonl")
    store.append(point("a"))
    with store.path.open("ab") as handle:
        handle.write(b"garbage\n")
    store.append(point("b"))
    with pytest.raises(WorkbenchError, match=r"r\.jsonl: line 2 is not a point record.*delete that line"):
        store.read()


def _append_forever(path: str) -> None:
    store = ResultStore(path)
    index = 0
    while True:
        store.append(point(f"p{index}", float(index)))
        index += 1


def test_sigkill_mid_stream_leaves_only_whole_points(tmp_path):
    """A writer killed at an arbitrary moment: every line read back is a complete, valid point."""
    path = tmp_path / "r.jsonl"
    writer = multiprocessing.get_context("fork").Process(target=_append_forever, args=(str(path),))
    writer.start()
    while not path.exists() or path.stat().st_size < 20_000:
        pass
    os.kill(writer.pid, signal.SIGKILL)
    writer.join()
    results = ResultStore(path).read()
    assert len(results) >= 20
    assert [r.point_id for r in results] == [f"p{i}" for i in range(len(results))]
    assert all(r.summary["output_throughput"] == float(i) for i, r in enumerate(results))


def test_latencies_frame_is_long(tmp_path):
    frame = latencies_frame([point("a"), point("b")], label_columns=("max_num_seqs",))
    assert list(frame.columns) == ["point_id", "max_num_seqs", "metric", "value"]
    assert frame["value"].tolist() == [1.0, 2.0, 1.0, 2.0]
    assert set(frame["metric"]) == {"ttft_ms"}
