"""Fixtures shared by the unit tests."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["eager", "fused"])
def decode_path(request, monkeypatch):
    """Run paged decodes through the eager PyTorch path or the Inductor-fused kernel (fused_decode);
    a fused run also fails if the kernel could not be compiled (the eager fallback would hide it)."""
    monkeypatch.setenv("ASCEND_BACKEND_FUSED_DECODE", "off" if request.param == "eager" else "on")
    yield request.param
    if request.param == "fused":
        from ascend_backend.attention import fused_decode

        assert fused_decode.failure() is None, f"the fused kernel did not compile: {fused_decode.failure()}"
