"""Suite-wide settings: `npu`-marked tests skip unless an Ascend NPU is usable here."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = REPO_ROOT / "tests" / "fixtures"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from ascend_backend.device import npu_status

    status = npu_status()
    if status.available:
        return
    skip = pytest.mark.skip(reason=f"needs an Ascend NPU: {status.kind.value} ({status.detail})")
    for item in items:
        if "npu" in item.keywords:
            item.add_marker(skip)
