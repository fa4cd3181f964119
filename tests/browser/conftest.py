"""The browser tier: the distribution's headless Chromium, driven by Playwright's Python package.

Playwright's own browser download cannot work offline, so the tests launch the system Chromium
(`apt-get install chromium`, which `scripts/setup.sh` does where it can) through `executable_path`.
Without it the whole tier skips and says why. Chromium's background networking is switched off: on a
closed network it would otherwise keep retrying Google's hosts.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """One Chromium per test module, closed after it: while Playwright's sync API runs it holds an asyncio
    loop on the main thread, and every `asyncio.run` elsewhere in the session (the load generator) would
    fail with "cannot be called from a running event loop"."""
    executable = chromium_path()
    if executable is None:
        pytest.skip("no Chromium on this machine: `apt-get install chromium` (scripts/setup.sh does it as root)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright's Python package is missing: install the project's dev extra")
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        try:
            yield instance
        finally:
            instance.close()
