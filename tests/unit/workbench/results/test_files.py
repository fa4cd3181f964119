"""Atomic writes and staged directories: a reader sees the old thing or the new one, never half of either."""

from __future__ import annotations

import json
import os

import pytest

from workbench.errors import WorkbenchError
from workbench.results.envelope import DocumentKind, envelope, kind_of, provenance_of, write_result
from workbench.results.files import remove_leftovers, remove_tree, staged_directory, write_json, write_text


def test_write_text_replaces_in_one_step_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "deep" / "a.txt"
    write_text(target, "old")
    inode = target.stat().st_ino
    write_text(target, "new")
    assert target.read_text() == "new" and target.stat().st_ino != inode  # a rename, not a rewrite in place
    assert os.listdir(target.parent) == ["a.txt"]
    assert target.stat().st_mode & 0o777 == 0o644


def test_a_failed_write_keeps_the_old_file_and_removes_its_temporary(tmp_path):
    target = tmp_path / "a.json"
    write_json(target, {"v": 1})
    with pytest.raises(TypeError):
        write_text(target, 123)  # type: ignore[arg-type]
    assert json.loads(target.read_text()) == {"v": 1} and os.listdir(tmp_path) == ["a.json"]


def test_staged_directory_becomes_the_target_only_when_complete(tmp_path):
    target = tmp_path / "model"
    with staged_directory(target) as staging:
        (staging / "w.bin").write_bytes(b"1")
        assert not target.exists() and staging.name.startswith(".model.staging-")
    assert (target / "w.bin").read_bytes() == b"1"
    assert target.stat().st_mode & 0o777 == 0o755 and (target / "w.bin").stat().st_mode & 0o777 == 0o644
    with pytest.raises(KeyboardInterrupt), staged_directory(target) as staging:
        (staging / "w.bin").write_bytes(b"2")
        raise KeyboardInterrupt
    assert (target / "w.bin").read_bytes() == b"1" and sorted(os.listdir(tmp_path)) == ["model"]
    with staged_directory(target) as staging:
        (staging / "v.bin").write_bytes(b"3")
    assert os.listdir(target) == ["v.bin"] and sorted(os.listdir(tmp_path)) == ["model"]


def test_leftovers_of_a_killed_build_are_removed_and_nothing_else(tmp_path):
    target = tmp_path / "m"
    for name in (".m.staging-abc", ".m.retired-1-2", ".other.staging-x", "m"):
        (tmp_path / name).mkdir()
    remove_leftovers(target)
    assert sorted(os.listdir(tmp_path)) == [".other.staging-x", "m"]
    remove_tree(target)
    assert sorted(os.listdir(tmp_path)) == [".other.staging-x"]


def test_the_stamp_has_one_key_and_old_keys_still_read(tmp_path):
    stamp = {"created_at": "2026-12-01T10:00:00+0000"}
    kind = DocumentKind("example", 2)
    path = write_result(tmp_path / "r.json", {"summary": {"x": 1}}, stamp, kind)
    data = json.loads(path.read_text())
    assert data == {"kind": "example", "schema_version": 2, "provenance": stamp, "summary": {"x": 1}}
    assert list(data)[:3] == ["kind", "schema_version", "provenance"]  # what it is comes first
    assert provenance_of({"meta": stamp, "workload": {}}) == stamp  # a bench JSON before the key was one
    assert provenance_of({"fingerprint": stamp}) == stamp  # a sweep point before the key was one
    assert provenance_of({"summary": {}}) == {}
    for reserved in ("provenance", "kind", "schema_version"):
        with pytest.raises(ValueError, match=f"already has \\['{reserved}'\\]"):
            envelope({reserved: {}}, stamp, kind)


def test_a_document_is_read_by_its_kind_and_a_newer_layout_is_refused(tmp_path):
    kind = DocumentKind("example", 2)
    older = tmp_path / "v1.json"
    older.write_text(json.dumps({"kind": "example", "schema_version": 1, "x": 1}))
    assert kind.read(older)["x"] == 1
    assert kind_of({"kind": "example"}) == ("example", 1)  # no version written: the first layout
    assert kind_of({"workload": {}}) is None  # written before kinds existed
    newer = tmp_path / "v3.json"
    newer.write_text(json.dumps({"kind": "example", "schema_version": 3}))
    with pytest.raises(WorkbenchError, match="schema version 3 is newer than this workbench reads \\(up to 2\\)"):
        kind.read(newer)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"kind": "bench", "schema_version": 1}))
    with pytest.raises(WorkbenchError, match="is a 'bench' result, not a 'example' one"):
        kind.read(other)
    unstamped = tmp_path / "old.json"
    unstamped.write_text("{}")
    with pytest.raises(WorkbenchError, match="carries no 'kind'"):
        kind.read(unstamped)
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(WorkbenchError, match="broken.json: not valid JSON"):
        kind.read(broken)
    with pytest.raises(WorkbenchError, match="missing.json: file not found"):
        kind.read(tmp_path / "missing.json")
