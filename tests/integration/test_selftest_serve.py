"""`selftest --serve`: one request through the session's tiny vLLM CPU server, which loaded the plugin.

Shares the session's server (tests/integration/conftest.py `tiny_server`): no server start of its own.
"""

from __future__ import annotations

import pytest

from workbench.selftest.api import SelftestRequest, run_selftest
from workbench.selftest.report import KernelStatus

pytestmark = pytest.mark.integration


def test_the_served_request_goes_through_the_plugin(tiny_server):
    report = run_selftest(SelftestRequest(ops=("rms_norm",), native=False), server=tiny_server)
    assert report.serve.status is KernelStatus.RAN, report.serve.reason
    assert {name for name, outcome, _ in report.serve.checks if outcome == "pass"} >= {"models", "chat"}
    assert "overrides:" in report.serve.plugin_line  # the plugin's registration line, read from the server log
