"""The graph mode and model facts of a running vLLM engine, read from its config object.

Inside a vLLM engine on vllm-ascend the platform has already applied its rewrites to the config
(`NPUPlatform.check_and_update_config`: FULL_AND_PIECEWISE -> PIECEWISE at some tags, enforce_eager ->
NONE, torchair's own mode), so what `vllm_config` holds is the effective mode. This module reads it
duck-typed (no vLLM import: ascend_backend installs with torch alone):

- `compilation_config.cudagraph_mode` (vLLM's CUDAGraphMode, v0.10.1 on: `.name` is the mode);
- before that, `compilation_config.level` (0 = eager, 3 = piecewise compile) with `full_cuda_graph`
  (vllm-ascend v0.9.x-v0.10.0rc1: a full ACL graph);
- `model_config.enforce_eager` (eager whatever the compilation config says);
- `additional_config` (vllm-ascend's own settings): `torchair_graph_config.enabled` (torchair mode,
  v0.9.0rc1-v0.11.0), `xlite_graph_config.enabled` (xlite, v0.12.0rc1 on), `pa_shape_list` (decode batch
  sizes that run _npu_paged_attention under FULL_DECODE_ONLY);
- `model_config.architectures[0]` (the model's architecture, a table condition).

The vLLM plugin registers `current_vllm_config` as the provider (`set_provider`), so inside the engine
`ascend_backend.platform.kernels.active_context()` uses the engine's mode; outside it the mode comes from
ASCEND_BACKEND_KERNELS or the caller (`ascend-workbench kernels --graph-mode`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ascend_backend.platform.kernels.table import GraphMode

_PROVIDER: Callable[[], Any] | None = None
_SEEN: EngineFacts | None = None  # the engine's facts once read: its config does not change within a process


@dataclass(frozen=True)
class EngineFacts:
    """What the engine's config says, and where each part was read."""

    graph_mode: GraphMode
    graph_basis: str
    pa_shape_list: tuple[int, ...] = ()
    architecture: str | None = None


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _enabled(section: Any) -> bool:
    return bool(_get(section, "enabled", False)) if section is not None else False


def _mode_name(value: Any) -> str | None:
    """CUDAGraphMode.FULL_DECODE_ONLY / 'FULL_DECODE_ONLY' / a tuple-valued enum member -> its name."""
    if value is None:
        return None
    name = getattr(value, "name", None) or str(value)
    return name.rsplit(".", 1)[-1].upper()


def facts_from_vllm_config(vllm_config: Any) -> EngineFacts | None:
    """The engine's facts from a VllmConfig-like object (attributes or mappings); None when it is None."""
    if vllm_config is None:
        return None
    additional = _get(vllm_config, "additional_config") or {}
    model = _get(vllm_config, "model_config")
    compilation = _get(vllm_config, "compilation_config")
    architectures = _get(model, "architectures") or _get(_get(model, "hf_config"), "architectures") or []
    architecture = str(architectures[0]) if architectures else None
    pa_shapes = tuple(int(n) for n in (_get(additional, "pa_shape_list") or ()))
    if _enabled(_get(additional, "torchair_graph_config")):
        return EngineFacts(
            GraphMode.TORCHAIR, "vLLM engine: additional_config torchair_graph_config.enabled", pa_shapes, architecture
        )
    if _enabled(_get(additional, "xlite_graph_config")):
        return EngineFacts(
            GraphMode.XLITE, "vLLM engine: additional_config xlite_graph_config.enabled", pa_shapes, architecture
        )
    if _get(model, "enforce_eager", False):
        return EngineFacts(GraphMode.NONE, "vLLM engine: model_config.enforce_eager", pa_shapes, architecture)
    mode = _mode_name(_get(compilation, "cudagraph_mode"))
    if mode is not None and mode in GraphMode.__members__:
        return EngineFacts(
            GraphMode[mode], f"vLLM engine: compilation_config.cudagraph_mode={mode}", pa_shapes, architecture
        )
    level = _get(compilation, "level", _get(compilation, "mode"))
    level_value = getattr(level, "value", level)
    if isinstance(level_value, int):
        if level_value == 0:
            return EngineFacts(GraphMode.NONE, "vLLM engine: compilation_config.level=0", pa_shapes, architecture)
        full = bool(_get(compilation, "full_cuda_graph", False))
        graph = GraphMode.FULL if full else GraphMode.PIECEWISE
        basis = f"vLLM engine: compilation_config.level={level_value}, full_cuda_graph={full}"
        return EngineFacts(graph, basis, pa_shapes, architecture)
    return EngineFacts(
        GraphMode.NONE,
        "vLLM engine: no cudagraph_mode or compilation level in its config; eager assumed",
        pa_shapes,
        architecture,
    )


def set_provider(provider: Callable[[], Any] | None) -> None:
    """Install the function that returns the running engine's vllm_config (None outside an engine)."""
    global _PROVIDER, _SEEN
    _PROVIDER, _SEEN = provider, None


def engine_facts() -> EngineFacts | None:
    """This process's engine facts, or None when no engine config is (or was) available.

    vLLM sets its current config only around model construction and some steps; the first one read is
    kept, since an engine process serves one config for its whole life.
    """
    global _SEEN
    if _SEEN is not None or _PROVIDER is None:
        return _SEEN
    try:
        config = _PROVIDER()
    except Exception:  # vLLM raises outside its config context: "no engine config here (yet)"
        return None
    _SEEN = facts_from_vllm_config(config)
    return _SEEN
