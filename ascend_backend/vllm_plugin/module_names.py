"""Module names inside a vLLM engine, so a fault with `module=` hits only that module's op calls.

The registry limits a fault to a module through the names of the modules running (`registry.module_scope`,
`registry.attach_module_names`), which vLLM's layers do not set. When ASCEND_BACKEND_FAULT names a module,
the plugin has vLLM's model loader call back on the loaded model (`loader_hook`, as the dump switch does) and hooks the
loaded target model's modules with their qualified names, e.g. `model.layers.2.post_attention_layernorm`:
a twin run can then break one op in one layer of one side and expect the layer compare to name exactly it.
Forward hooks need an eager engine (captured graphs replay without them; torch.compile would trace
them), so a compiled engine gets a warning and the fault never fires.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from torch import nn

from ascend_backend.registry import attach_module_names
from ascend_backend.vllm_plugin.loader_hook import on_vllm_model_load

logger = logging.getLogger("vllm.ascend_backend")


def name_modules(model: nn.Module, model_config: Any) -> None:
    """Give the loaded target model's modules their names for the registry (an eager engine only)."""
    if model_config.enforce_eager:
        attach_module_names(model)
    else:
        logger.warning(
            "ascend_backend: ASCEND_BACKEND_FAULT names a module, which needs an eager engine (graphs replay "
            "without module hooks); start vLLM with --enforce-eager or select the call with call=N"
        )


@functools.cache
def install_module_names_hook() -> None:
    """Once per process: vLLM's model loader names the modules of every target model it loads."""
    on_vllm_model_load(name_modules)


__all__ = ["install_module_names_hook", "name_modules"]
