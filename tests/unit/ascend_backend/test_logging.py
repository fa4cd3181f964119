"""ASCEND_BACKEND_LOG_LEVEL: applied when set (records reach stderr of any host), ignored when unset."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO_ROOT

SNIPPET = (
    "import logging, ascend_backend; "
    "logging.getLogger('ascend_backend.attention.fused_decode').info('info-line'); "
    "logging.getLogger('ascend_backend.registry').debug('debug-line')"
)


def run(level: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "ASCEND_BACKEND_LOG_LEVEL"}
    if level is not None:
        env["ASCEND_BACKEND_LOG_LEVEL"] = level
    done = subprocess.run(
        [sys.executable, "-c", SNIPPET], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    return done.stderr


def test_info_level_shows_info_records_once_each():
    err = run("info")
    assert err.count("info-line") == 1 and "ascend_backend INFO" in err
    assert "debug-line" not in err


def test_debug_level_shows_debug_records():
    assert "debug-line" in run("DEBUG")


def test_unset_leaves_logging_to_the_host():
    err = run(None)
    assert "info-line" not in err and "debug-line" not in err
