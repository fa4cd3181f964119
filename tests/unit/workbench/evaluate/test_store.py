"""Record files: header and run key, resume, refusal to mix runs, torn tails, last record wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.errors import WorkbenchError
from workbench.evaluate.store import RecordFile
from workbench.results.jsonl import DamagedLineWarning

HEADER = {"key": {"dataset": "text", "model": "m", "model_root": "/a"}, "provenance": {"created_at": "now"}}


def test_new_file_gets_the_header_and_a_rerun_resumes(tmp_path: Path) -> None:
    store = RecordFile(tmp_path / "text.jsonl")
    assert store.start(HEADER) is False
    store.append({"kind": "nll", "id": "a", "nll_sum": 1.0})
    again = RecordFile(tmp_path / "text.jsonl")
    assert again.start(HEADER) is True
    assert again.header()["provenance"] == {"created_at": "now"}
    assert again.records("nll") == {"a": {"kind": "nll", "id": "a", "nll_sum": 1.0}}
    assert again.records("greedy") == {}


def test_another_run_key_is_refused_with_what_differs(tmp_path: Path) -> None:
    RecordFile(tmp_path / "text.jsonl").start(HEADER)
    other = {**HEADER, "key": {**HEADER["key"], "model_root": "/b"}}
    with pytest.raises(WorkbenchError, match=r"another run \(model_root: '/a' there, '/b' now\); pass another --out"):
        RecordFile(tmp_path / "text.jsonl").start(other)


def test_the_last_record_wins_and_the_index_follows_appends(tmp_path: Path) -> None:
    store = RecordFile(tmp_path / "x.jsonl")
    store.start(HEADER)
    store.append({"kind": "greedy", "id": "a", "error": "HTTP 500"})
    assert "error" in store.records("greedy")["a"]
    store.append({"kind": "greedy", "id": "a", "text": "ok"})
    assert store.records("greedy")["a"]["text"] == "ok"
    assert RecordFile(tmp_path / "x.jsonl").records("greedy")["a"]["text"] == "ok"


def test_a_torn_last_line_is_ignored_then_cut_before_the_next_append(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    store = RecordFile(path)
    store.start(HEADER)
    store.append({"kind": "nll", "id": "a"})
    with path.open("ab") as handle:
        handle.write(b'{"kind": "nll", "id": "b", "nll_')  # the process died mid-write
    assert set(RecordFile(path).records("nll")) == {"a"}
    fresh = RecordFile(path)
    fresh.append({"kind": "nll", "id": "c"})
    assert set(RecordFile(path).records("nll")) == {"a", "c"}
    assert path.read_text().count("\n") == 3


def test_a_corrupt_middle_line_is_reported_with_its_number_and_the_records_around_it_read(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"kind": "header", "key": {}}\nnot json\n{"kind": "nll", "id": "a"}\n')
    with pytest.warns(DamagedLineWarning, match=r"x.jsonl: line 2 is damaged"):
        assert set(RecordFile(path).records("nll")) == {"a"}
    assert "not json" in path.read_text()
