"""Fixtures of the embedded-model tests (the tiny build itself is shared: tests/unit/workbench/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_loaded(tiny_cache: Path):
    """(tokenizer, model) of tiny loaded by transformers in float32, loaded once."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = tiny_cache / "models" / "tiny"
    return AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
