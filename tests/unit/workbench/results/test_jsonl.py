"""The one results log: whole lines only, a torn tail ignored then cut, a damaged line kept and reported."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal

import pytest

from workbench.results.jsonl import DamagedLineWarning, JsonlLog


def test_append_read_round_trip_in_file_order(tmp_path):
    log = JsonlLog(tmp_path / "r.jsonl")
    assert not log.exists() and log.read().records == ()
    log.append({"id": "a", "value": 1.5})
    log.append({"id": "b", "text": "é"})
    assert log.read().records == ({"id": "a", "value": 1.5}, {"id": "b", "text": "é"})
    assert log.path.read_bytes().count(b"\n") == 2


def test_torn_last_line_is_ignored_then_cut_before_the_next_append(tmp_path):
    log = JsonlLog(tmp_path / "r.jsonl")
    log.append({"id": "a"})
    whole = json.dumps({"id": "b", "pad": "x" * 50}).encode()
    with log.path.open("ab") as handle:
        handle.write(whole[: len(whole) // 2])  # a write cut short by a kill
    contents = log.read()
    assert contents.records == ({"id": "a"},) and contents.damaged == ()
    log.append({"id": "c"})
    assert [r["id"] for r in log.read().records] == ["a", "c"]
    assert b'"b"' not in log.path.read_bytes()


def test_only_line_torn(tmp_path):
    log = JsonlLog(tmp_path / "r.jsonl")
    log.path.write_bytes(b'{"id": "x", "sta')
    assert log.read().records == ()
    log.append({"id": "y"})
    assert log.path.read_bytes() == b'{"id":"y"}\n'


@pytest.mark.parametrize("bad", [b"garbage", b"[1, 2]", b'{"id": "refused"}'])
def test_a_damaged_middle_line_is_kept_reported_with_its_number_and_skipped(tmp_path, bad):
    log = JsonlLog(tmp_path / "r.jsonl")
    log.append({"id": "a"})
    with log.path.open("ab") as handle:
        handle.write(bad + b"\n")
    log.append({"id": "c"})

    def decode(data):
        if data["id"] == "refused":
            raise KeyError("status")
        return data["id"]

    with pytest.warns(DamagedLineWarning, match=r"r\.jsonl: line 2 is damaged .*kept in the file"):
        contents = log.read(decode)
    assert contents.records == ("a", "c")
    assert [(d.number, d.path) for d in contents.damaged] == [(2, log.path)]
    log.append({"id": "d"})  # appending never removes the damaged line: what it held may be recovered by hand
    assert bad in log.path.read_bytes()


def _append_forever(path: str) -> None:
    log = JsonlLog(path)
    index = 0
    while True:
        log.append({"id": f"p{index}", "value": float(index), "pad": "x" * 64})
        index += 1


def test_sigkill_mid_stream_leaves_only_whole_records(tmp_path):
    """A writer killed at an arbitrary moment: every record read back is complete and in order."""
    path = tmp_path / "r.jsonl"
    writer = multiprocessing.get_context("fork").Process(target=_append_forever, args=(str(path),))
    writer.start()
    while not path.exists() or path.stat().st_size < 20_000:
        pass
    os.kill(writer.pid, signal.SIGKILL)
    writer.join()
    contents = JsonlLog(path).read()
    assert len(contents.records) >= 20 and contents.damaged == ()
    assert [r["id"] for r in contents.records] == [f"p{i}" for i in range(len(contents.records))]
