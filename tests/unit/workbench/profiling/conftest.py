"""Paths of the profiling fixtures (origins in tests/fixtures/profiling/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURES

PROFILING = FIXTURES / "profiling"


@pytest.fixture
def fixtures() -> Path:
    return PROFILING
