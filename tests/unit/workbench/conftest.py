"""Fixtures the workbench tests share: one `tiny` build per test session, in a temporary cache, read-only."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.embedded_models import api as embedded_models


@pytest.fixture(scope="session")
def tiny_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workbench cache holding the prepared `tiny` model (built once per session, in seconds)."""
    root = tmp_path_factory.mktemp("workbench-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ASCEND_WORKBENCH_CACHE", str(root))
        embedded_models.prepare("tiny")
    return root


@pytest.fixture
def tiny_dir(tiny_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The prepared tiny directory, with the cache env var pointing at its cache (tests must not modify it)."""
    monkeypatch.setenv("ASCEND_WORKBENCH_CACHE", str(tiny_cache))
    return tiny_cache / "models" / "tiny"
