"""Every environment variable ascend_backend reads, in one documented table.

Values are read lazily, at attribute access, never at import: a test or a launcher can set a variable
after `import ascend_backend` and the next read sees it. Nothing else in the package reads
`os.environ` for its own settings.

    >>> from ascend_backend import envs
    >>> envs.ASCEND_BACKEND_FORCE_NATIVE      # frozenset of op names, or {"*"} for all
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def _op_set(raw: str) -> frozenset[str]:
    """'rms_norm, silu_and_mul' -> {'rms_norm', 'silu_and_mul'}; 'all', '1' or '*' -> {'*'}."""
    items = {part.strip() for part in raw.split(",") if part.strip()}
    if items & {"all", "1", "*", "true"}:
        return frozenset({"*"})
    return frozenset(items)


def _flag(raw: str) -> bool:
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def _auto_on_off(name: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value in {"", "auto"}:
            return "auto"
        if value in {"1", "true", "yes", "on"}:
            return "on"
        if value in {"0", "false", "no", "off"}:
            return "off"
        raise ValueError(f"{name}={raw!r} is not understood; use auto, on or off")

    return parse


def _key_values(name: str) -> Callable[[str], tuple[tuple[str, str], ...]]:
    """'release=0.13.0, chip=A3' -> (('release', '0.13.0'), ('chip', 'A3')); the meaning of each key is
    checked where it is used (ascend_backend.platform.kernels.context.apply_override)."""

    def parse(raw: str) -> tuple[tuple[str, str], ...]:
        items = []
        for part in (p.strip() for p in raw.split(",")):
            if not part:
                continue
            key, sep, value = part.partition("=")
            if not sep or not key.strip() or not value.strip():
                raise ValueError(f"{name}: {part!r} is not key=value (e.g. {name}=release=0.13.0,chip=A3)")
            items.append((key.strip(), value.strip()))
        return tuple(items)

    return parse


@dataclass(frozen=True)
class EnvVar:
    name: str
    default: str
    parse: Callable[[str], Any]
    doc: str


ENV_VARS: tuple[EnvVar, ...] = (
    EnvVar(
        "ASCEND_BACKEND_FORCE_NATIVE",
        "",
        _op_set,
        "Comma-separated op names that must use the native PyTorch path even where an NPU/CUDA "
        "kernel exists; 'all' forces every op. The first thing to try when an NPU kernel is suspected "
        "of a wrong result.",
    ),
    EnvVar(
        "ASCEND_BACKEND_DISABLE_NPU",
        "0",
        _flag,
        "1 = never import torch_npu (treat the machine as having no NPU). Useful to take a broken CANN "
        "install out of the picture.",
    ),
    EnvVar(
        "ASCEND_BACKEND_LOG_LEVEL",
        "WARNING",
        str.upper,
        "Log level of the 'ascend_backend' logger (fallback decisions are logged once at INFO).",
    ),
    EnvVar(
        "ASCEND_BACKEND_FAULT",
        "",
        str,
        "Fault to inject in every process that imports the backend, e.g. 'rms_norm:nan' or "
        "'rms_norm:scale:factor=1.01:call=3:module=model.layers.2.*'. Used by the debugging tools to "
        "break exactly one op inside a real server.",
    ),
    EnvVar(
        "ASCEND_BACKEND_DISABLED_OPS",
        "",
        _op_set,
        "Comma-separated op names whose vLLM plugin override is not installed (vLLM's own layer runs).",
    ),
    EnvVar(
        "ASCEND_BACKEND_STATS_FILE",
        "",
        str,
        "Path prefix where each process writes its op call statistics as JSON at exit "
        "(<prefix>.<pid>.json), so call counts can be read from outside a server.",
    ),
    EnvVar(
        "ASCEND_BACKEND_PLANTED",
        "",
        str,
        "A planted host cost for the performance twin's checks (vllm_plugin.planted), e.g. 'step_sleep:ms=5': the "
        "host sleeps before every forward step of the engine's model. Changes no output.",
    ),
    EnvVar(
        "ASCEND_BACKEND_DUMP",
        "",
        str,
        "Record module outputs of a vLLM engine's model in the workbench dump format (vllm_plugin.dump), e.g. "
        "'dir=/tmp/engine-dump;steps=4;modules=model.layers.*,logits_processor;layers=0-3;mode=tensors' (or just a "
        "directory: every module, one step). Needs an eager engine (--enforce-eager); stops after the steps.",
    ),
    EnvVar(
        "ASCEND_BACKEND_FUSED_DECODE",
        "auto",
        _auto_on_off("ASCEND_BACKEND_FUSED_DECODE"),
        "CPU paged decode through one Inductor-compiled gather-and-attend kernel: auto (when a call reads "
        "at least 1 MiB of K/V and a C++ compiler works), on (every call), off (eager PyTorch only).",
    ),
    EnvVar(
        "ASCEND_BACKEND_KERNELS",
        "",
        _key_values("ASCEND_BACKEND_KERNELS"),
        "Override the NPU kernel selection (ascend_backend.platform.kernels): release=0.13.0 (the vllm-ascend release whose "
        "calls to make), chip=A2|A3|A5|310P, cann=8.3.RC1, graph=NONE|PIECEWISE|FULL|FULL_DECODE_ONLY, pa_shape=1 "
        "(the decode batch is in vllm-ascend's pa_shape_list), or OP=RECIPE to pin one op's call, e.g. "
        "paged_decode_attention=atb_paged_attention. Comma-separated.",
    ),
    EnvVar(
        "TORCH_DEVICE_BACKEND_AUTOLOAD",
        "1",
        lambda raw: raw.strip() == "1",
        "torch's own switch (torch/__init__.py _is_device_backend_autoload_enabled): 1 = `import torch` imports "
        "torch_npu. Read here to know whether it will; ascend_backend.platform.autoload turns it off around "
        "torch's own import and loads torch_npu right after, so a broken CANN install is diagnosed, not fatal.",
    ),
)

_BY_NAME = {var.name: var for var in ENV_VARS}


def __getattr__(name: str) -> Any:
    var = _BY_NAME.get(name)
    if var is None:
        raise AttributeError(f"ascend_backend.envs has no variable {name!r}; known: {sorted(_BY_NAME)}")
    return var.parse(os.environ.get(name, var.default))


def __dir__() -> list[str]:
    return sorted(_BY_NAME) + ["ENV_VARS", "EnvVar", "describe"]


def describe() -> list[dict[str, str]]:
    """Rows (name, value, default, doc) for notebooks and the README."""
    return [{"name": v.name, "value": os.environ.get(v.name, ""), "default": v.default, "doc": v.doc} for v in ENV_VARS]
