"""Fixtures: one `tiny` build per test session, in a temporary cache, shared read-only by the tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.embedded_models import api as embedded_models


@pytest.fixture(scope="session")
def tiny_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
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


@pytest.fixture(scope="session")
def tiny_loaded(tiny_cache: Path):
    """(tokenizer, model) of tiny loaded by transformers in float32, loaded once."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = tiny_cache / "models" / "tiny"
    return AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
