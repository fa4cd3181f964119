"""Log-level checks and the "ERROR everywhere, DEBUG for one module" environment."""

from __future__ import annotations

import io
import json
import logging
import logging.config

import pytest

from tests.unit.workbench.check.fakes import make_ctx
from workbench.check.logging_env import check_cann_level, check_slog_stdout, check_vllm_level, focused_logging
from workbench.check.result import Status


def ctx(tmp_path, **env):
    return make_ctx(tmp_path, {"PATH": "/usr/bin", **env})


@pytest.mark.parametrize(
    "value, status", [(None, Status.PASS), ("error", Status.PASS), ("DEBUG", Status.WARN), ("VERBOSE", Status.FAIL)]
)
def test_vllm_level(tmp_path, value, status):
    env = {} if value is None else {"VLLM_LOGGING_LEVEL": value}
    assert check_vllm_level(ctx(tmp_path, **env)).status is status


@pytest.mark.parametrize(
    "value, status",
    [
        (None, Status.PASS),
        ("3", Status.PASS),
        ("0", Status.WARN),
        ("1", Status.WARN),
        ("ERROR", Status.FAIL),
        ("7", Status.FAIL),
    ],
)
def test_cann_level(tmp_path, value, status):
    env = {} if value is None else {"ASCEND_GLOBAL_LOG_LEVEL": value}
    assert check_cann_level(ctx(tmp_path, **env)).status is status


@pytest.mark.parametrize("value, status", [(None, Status.PASS), ("1", Status.PASS), ("yes", Status.FAIL)])
def test_slog_stdout(tmp_path, value, status):
    env = {} if value is None else {"ASCEND_SLOG_PRINT_TO_STDOUT": value}
    assert check_slog_stdout(ctx(tmp_path, **env)).status is status


def test_focus_on_cann_module():
    plan = focused_logging("hccl")
    assert plan.environment() == {
        "VLLM_LOGGING_LEVEL": "ERROR",
        "ASCEND_GLOBAL_LOG_LEVEL": "3",
        "ASCEND_SLOG_PRINT_TO_STDOUT": "1",
        "ASCEND_MODULE_LOG_LEVEL": "HCCL=0",
    }


def test_focus_on_vllm_logger_filters_records(tmp_path):
    plan = focused_logging("vllm.v1.core.sched.scheduler")
    env = plan.environment(tmp_path / "logging.json")
    assert env["VLLM_LOGGING_LEVEL"] == "ERROR" and env["ASCEND_GLOBAL_LOG_LEVEL"] == "3"
    config = json.loads((tmp_path / "logging.json").read_text())
    stream = io.StringIO()
    config["handlers"]["console"]["stream"] = stream  # what vLLM's dictConfig would build, to a buffer
    names = ("vllm", "vllm_ascend", "vllm.v1.core.sched.scheduler")
    saved = {
        n: (logging.getLogger(n).level, logging.getLogger(n).handlers[:], logging.getLogger(n).propagate) for n in names
    }
    try:
        logging.config.dictConfig(config)
        logging.getLogger("vllm.v1.core.sched.scheduler").debug("scheduler detail")
        logging.getLogger("vllm.engine.core").warning("engine warning")
        logging.getLogger("vllm_ascend.worker").info("plugin info")
        logging.getLogger("vllm.engine.core").error("engine error")
    finally:
        for n, (level, handlers, propagate) in saved.items():
            lg = logging.getLogger(n)
            lg.setLevel(level)
            lg.handlers[:] = handlers
            lg.propagate = propagate
    out = stream.getvalue()
    assert "scheduler detail" in out and "engine error" in out
    assert "engine warning" not in out and "plugin info" not in out


def test_focus_needs_config_path_and_known_target():
    with pytest.raises(ValueError, match="needs a path"):
        focused_logging("vllm_ascend.worker").environment()
    with pytest.raises(ValueError, match="CANN module"):
        focused_logging("my_module")
