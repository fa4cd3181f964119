"""Log levels: vLLM's and CANN's are separate knobs, read separately, and both can drown you.

- `VLLM_LOGGING_LEVEL` (DEBUG/INFO/WARNING/ERROR/CRITICAL, default INFO) sets vLLM's Python loggers;
  per-logger levels need a logging config file (`VLLM_LOGGING_CONFIG_PATH`, a dictConfig JSON).
- `ASCEND_GLOBAL_LOG_LEVEL` (0 DEBUG, 1 INFO, 2 WARNING, 3 ERROR, 4 NULL; default 3) sets CANN's;
  `ASCEND_MODULE_LOG_LEVEL=GE=0:RUNTIME=1` overrides single CANN modules.
- `ASCEND_SLOG_PRINT_TO_STDOUT=1` prints CANN's logs on stdout instead of only under ~/ascend/log.

docs/METHOD.md §9: "ERROR everywhere, then DEBUG for one module": `focused_logging` builds exactly
that environment for a vLLM logger name or a CANN module name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.check.context import CheckContext
from workbench.check.result import CheckResult, Group, failed, passed, warned

G = Group.LOGGING
VLLM_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
CANN_LEVELS = {"0": "DEBUG", "1": "INFO", "2": "WARNING", "3": "ERROR", "4": "NULL"}
# CANN module names seen in ASCEND_MODULE_LOG_LEVEL use (upper case in CANN's own docs and scripts).
CANN_MODULES = (
    "ASCENDCL",
    "GE",
    "FE",
    "TBE",
    "RUNTIME",
    "HCCL",
    "AICPU",
    "DRV",
    "TDT",
    "PROFILING",
    "DVPP",
    "OP",
    "ATB",
    "CCE",
    "TEFUSION",
    "AOE",
    "DEBUG",
    "MDCPROF",
)
_FOCUS_HINT = "start at ERROR and raise one module with workbench.check.focused_logging('<module>')"


def check_vllm_level(ctx: CheckContext) -> CheckResult:
    name = "logging.vllm_level"
    raw = ctx.environ.get("VLLM_LOGGING_LEVEL")
    expected = f"one of {', '.join(VLLM_LEVELS)}; ERROR while hunting a crash"
    if raw is None:
        return passed(name, G, "VLLM_LOGGING_LEVEL unset (vLLM default INFO)", expected)
    level = raw.strip().upper()
    if level not in VLLM_LEVELS:
        return failed(
            name,
            G,
            f"VLLM_LOGGING_LEVEL={raw!r}",
            expected,
            "export VLLM_LOGGING_LEVEL=ERROR (vLLM's logging setup rejects unknown level names)",
        )
    if level == "DEBUG":
        return warned(
            name,
            G,
            "VLLM_LOGGING_LEVEL=DEBUG for every vLLM logger",
            expected,
            f"global DEBUG buries the one line you need; {_FOCUS_HINT}",
        )
    return passed(name, G, f"VLLM_LOGGING_LEVEL={level}", expected)


def check_cann_level(ctx: CheckContext) -> CheckResult:
    name = "logging.cann_level"
    raw = ctx.environ.get("ASCEND_GLOBAL_LOG_LEVEL")
    expected = "0-4 (3 = ERROR is CANN's default and the right start)"
    module = ctx.environ.get("ASCEND_MODULE_LOG_LEVEL")
    extra = f"; ASCEND_MODULE_LOG_LEVEL={module}" if module else ""
    if raw is None:
        return passed(name, G, f"ASCEND_GLOBAL_LOG_LEVEL unset (CANN default 3 = ERROR){extra}", expected)
    level = CANN_LEVELS.get(raw.strip())
    if level is None:
        return failed(
            name,
            G,
            f"ASCEND_GLOBAL_LOG_LEVEL={raw!r}",
            expected,
            "export ASCEND_GLOBAL_LOG_LEVEL=3 (CANN ignores values outside 0-4)",
        )
    if raw.strip() in ("0", "1"):
        return warned(
            name,
            G,
            f"ASCEND_GLOBAL_LOG_LEVEL={raw.strip()} ({level}) for all of CANN{extra}",
            expected,
            "CANN's global DEBUG/INFO logs flood the disk and slow every op; export "
            f"ASCEND_GLOBAL_LOG_LEVEL=3 and {_FOCUS_HINT}",
        )
    return passed(name, G, f"ASCEND_GLOBAL_LOG_LEVEL={raw.strip()} ({level}){extra}", expected)


def check_slog_stdout(ctx: CheckContext) -> CheckResult:
    name = "logging.slog_stdout"
    raw = ctx.environ.get("ASCEND_SLOG_PRINT_TO_STDOUT")
    expected = "0 or 1 (1 while a process dies without a Python traceback)"
    if raw is None:
        return passed(name, G, "ASCEND_SLOG_PRINT_TO_STDOUT unset: CANN logs go to ~/ascend/log only", expected)
    if raw.strip() not in ("0", "1"):
        return failed(
            name,
            G,
            f"ASCEND_SLOG_PRINT_TO_STDOUT={raw!r}",
            expected,
            "export ASCEND_SLOG_PRINT_TO_STDOUT=1 to see CANN errors on stdout, 0 to keep them in files",
        )
    where = "stdout" if raw.strip() == "1" else "~/ascend/log only"
    return passed(name, G, f"ASCEND_SLOG_PRINT_TO_STDOUT={raw.strip()}: CANN logs go to {where}", expected)


def check_logging(ctx: CheckContext) -> list[CheckResult]:
    return [check_vllm_level(ctx), check_cann_level(ctx), check_slog_stdout(ctx)]


# -- "ERROR everywhere, DEBUG for one module" ---------------------------------------------------------


@dataclass(frozen=True)
class FocusedLogging:
    """Environment for one focused debugging run.

    `env` holds the variables to export. For a vLLM logger, `vllm_logging_config` is the dictConfig
    that keeps vLLM at ERROR and opens one logger at DEBUG; `environment(path)` writes it to `path` and
    returns `env` plus VLLM_LOGGING_CONFIG_PATH.
    """

    target: str
    kind: str  # "vllm" or "cann"
    env: dict[str, str]
    vllm_logging_config: dict[str, Any] | None = field(default=None)

    def environment(self, config_path: Path | None = None) -> dict[str, str]:
        if self.vllm_logging_config is None:
            return dict(self.env)
        if config_path is None:
            raise ValueError(f"focusing vLLM logger {self.target!r} needs a path for its logging config JSON")
        config_path.write_text(json.dumps(self.vllm_logging_config, indent=2))
        return {**self.env, "VLLM_LOGGING_CONFIG_PATH": str(config_path)}


def _vllm_config(target: str) -> dict[str, Any]:
    handler = {"class": "logging.StreamHandler", "formatter": "plain", "level": "DEBUG", "stream": "ext://sys.stdout"}
    quiet = {"handlers": ["console"], "level": "ERROR", "propagate": False}
    loggers: dict[str, Any] = {"vllm": dict(quiet), "vllm_ascend": dict(quiet)}
    loggers[target] = (
        {"level": "DEBUG"}
        if target.split(".")[0] in loggers
        else {"handlers": ["console"], "level": "DEBUG", "propagate": False}
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(levelname)s %(asctime)s [%(name)s] %(message)s"}},
        "handlers": {"console": handler},
        "loggers": loggers,
    }


def focused_logging(target: str) -> FocusedLogging:
    """ERROR everywhere (vLLM and CANN, CANN printed to stdout), DEBUG for `target`.

    `target` is a vLLM/vllm-ascend logger name ('vllm.v1.core.sched.scheduler', 'vllm_ascend.worker')
    or a CANN module name ('HCCL', 'GE', 'runtime'); anything else raises with the valid choices.
    """
    base = {"VLLM_LOGGING_LEVEL": "ERROR", "ASCEND_GLOBAL_LOG_LEVEL": "3", "ASCEND_SLOG_PRINT_TO_STDOUT": "1"}
    name = target.strip()
    if name.split(".")[0] in ("vllm", "vllm_ascend"):
        # With VLLM_LOGGING_CONFIG_PATH set vLLM applies that dictConfig instead of its default one, so
        # the file alone decides the levels; VLLM_LOGGING_LEVEL stays ERROR for anything it misses.
        env = {**base, "VLLM_CONFIGURE_LOGGING": "1"}
        return FocusedLogging(name, "vllm", env, _vllm_config(name))
    if name.upper() in CANN_MODULES:
        return FocusedLogging(name.upper(), "cann", {**base, "ASCEND_MODULE_LOG_LEVEL": f"{name.upper()}=0"})
    raise ValueError(
        f"unknown logging target {target!r}: give a vLLM logger name starting with 'vllm.' or 'vllm_ascend.', "
        f"or a CANN module: {', '.join(CANN_MODULES)}"
    )
