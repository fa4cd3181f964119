"""The backend inside vLLM: one short served request through a server that loaded the ascend_backend plugin.

vLLM loads the plugin in every process (entry point `vllm.general_plugins`); its registration logs one
line ("ascend_backend plugin: ...; overrides: ...; kernels: ..."), which says what it installed on this
platform. The self-test reads that line from the server's log and sends the smoke request (models, one
chat, one stream: `workbench.serving.smoke`), so the report shows the plugin active and serving.
"""

from __future__ import annotations

from workbench.errors import WorkbenchError
from workbench.selftest.report import KernelStatus, ServeRun
from workbench.serving.server import Server
from workbench.serving.smoke import run_smoke

PLUGIN_LINE = "ascend_backend plugin:"


def plugin_line(log: str) -> str:
    """The plugin's registration line from a server log ('' when it is not there)."""
    found = [line for line in log.splitlines() if PLUGIN_LINE in line]
    return found[-1].split(PLUGIN_LINE, 1)[1].strip() if found else ""


def serve_check(server: Server, max_tokens: int = 8) -> ServeRun:
    """Send the smoke request to `server` and read the plugin's line from its log (when the log is ours)."""
    try:
        report = run_smoke(server, max_tokens=max_tokens)
    except WorkbenchError as exc:
        return ServeRun(KernelStatus.ERROR, str(exc), server.url)
    line = plugin_line(server.log_text())
    checks = tuple((c.name, c.outcome.value, c.detail) for c in report.checks)
    if not report.passed:
        failed = next(c for c in report.checks if not c.passed)
        return ServeRun(KernelStatus.ERROR, f"{failed.name}: {failed.detail}", server.url, line, checks)
    why = "" if line else "served, but the plugin's registration line is not in a log this process can read"
    return ServeRun(KernelStatus.RAN, why, server.url, line, checks)


__all__ = ["PLUGIN_LINE", "plugin_line", "serve_check"]
