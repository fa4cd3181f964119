"""The atomic, idempotent cache: builders here are plain file writers, so every outcome is exact."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.embedded_models import cache


def writer(calls: list[str], content: str):
    def build(staging: Path) -> dict:
        calls.append(staging.name)
        assert list(staging.iterdir()) == [], "a build starts in an empty directory"
        (staging / "weights.bin").write_text(content)
        return {"content": content}

    return build


def test_first_build_renames_staging_into_place_with_provenance(tmp_path: Path) -> None:
    calls: list[str] = []
    target = tmp_path / "models" / "m"
    assert cache.build_atomically(target, "fp-1", writer(calls, "A")) == target
    assert (target / "weights.bin").read_text() == "A"
    assert cache.read_provenance(target) == {"content": "A", "fingerprint": "fp-1"}
    assert calls[0].startswith(".m.staging-")
    # Only the model and its lock file remain: no staging directory left behind.
    assert sorted(p.name for p in target.parent.iterdir()) == [".m.lock", "m"]
    assert target.stat().st_mode & 0o777 == 0o755
    assert (target / "weights.bin").stat().st_mode & 0o777 == 0o644


def test_current_build_is_reused_without_calling_the_builder(tmp_path: Path) -> None:
    calls: list[str] = []
    target = tmp_path / "m"
    cache.build_atomically(target, "fp-1", writer(calls, "A"))
    mtime = (target / "weights.bin").stat().st_mtime_ns
    cache.build_atomically(target, "fp-1", writer(calls, "B"))
    assert len(calls) == 1
    assert (target / "weights.bin").read_text() == "A"
    assert (target / "weights.bin").stat().st_mtime_ns == mtime


def test_new_fingerprint_or_force_replaces_the_build(tmp_path: Path) -> None:
    calls: list[str] = []
    target = tmp_path / "m"
    cache.build_atomically(target, "fp-1", writer(calls, "A"))
    cache.build_atomically(target, "fp-2", writer(calls, "B"))
    assert (target / "weights.bin").read_text() == "B"
    assert cache.read_provenance(target)["fingerprint"] == "fp-2"
    cache.build_atomically(target, "fp-2", writer(calls, "C"), force=True)
    assert (target / "weights.bin").read_text() == "C"
    assert len(calls) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == [".m.lock", "m"]


@pytest.mark.parametrize("error", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_failed_build_leaves_no_model_and_no_staging(tmp_path: Path, error: BaseException) -> None:
    def broken(staging: Path) -> dict:
        (staging / "config.json").write_text("{}")  # half a model
        raise error

    target = tmp_path / "m"
    with pytest.raises(type(error)):
        cache.build_atomically(target, "fp-1", broken)
    assert not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".m.lock"]


def test_failed_rebuild_keeps_the_previous_complete_build(tmp_path: Path) -> None:
    target = tmp_path / "m"
    cache.build_atomically(target, "fp-1", writer([], "A"))

    def broken(staging: Path) -> dict:
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        cache.build_atomically(target, "fp-2", broken)
    assert (target / "weights.bin").read_text() == "A"
    assert cache.is_current(target, "fp-1") and not cache.is_current(target, "fp-2")


def test_directory_without_provenance_is_not_taken_as_ready(tmp_path: Path) -> None:
    target = tmp_path / "m"
    target.mkdir()
    (target / "config.json").write_text("{}")  # e.g. copied by hand, or an old layout
    assert not cache.is_current(target, "fp-1")
    cache.build_atomically(target, "fp-1", writer([], "A"))
    assert sorted(p.name for p in target.iterdir()) == ["provenance.json", "weights.bin"]


def test_leftovers_of_a_killed_build_are_removed_by_the_next_build(tmp_path: Path) -> None:
    leftover = tmp_path / ".m.staging-abc123"
    leftover.mkdir()
    (leftover / "model.safetensors").write_bytes(b"partial")
    cache.build_atomically(tmp_path / "m", "fp-1", writer([], "A"))
    assert not leftover.exists()
