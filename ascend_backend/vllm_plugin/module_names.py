"""Module names inside a vLLM engine, so a fault with `module=` hits only that module's op calls.

The registry limits a fault to a module through the names of the modules running (`registry.module_scope`,
`registry.attach_module_names`), which vLLM's layers do not set. When ASCEND_BACKEND_FAULT names a module,
the plugin wraps vLLM's `BaseModelLoader.load_model` (as the dump switch does, see `dump`) and hooks the
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
from ascend_backend.vllm_plugin.dump import loader_arguments

logger = logging.getLogger("vllm.ascend_backend")


def name_modules_on_load(loader_class: Any) -> None:
    """Wrap `loader_class.load_model` so the target model's modules carry their names for the registry."""
    original = loader_class.load_model

    @functools.wraps(original)
    def load_model(self, *args: Any, **kwargs: Any) -> nn.Module:
        model = original(self, *args, **kwargs)
        vllm_config, model_config = loader_arguments(args, kwargs)
        if vllm_config is None or model_config is not vllm_config.model_config:
            return model  # a speculative-decoding drafter: faults name the target model's modules
        if model_config.enforce_eager:
            attach_module_names(model)
        else:
            logger.warning(
                "ascend_backend: ASCEND_BACKEND_FAULT names a module, which needs an eager engine (graphs replay "
                "without module hooks); start vLLM with --enforce-eager or select the call with call=N"
            )
        return model

    loader_class.load_model = load_model


@functools.cache
def install_module_names_hook() -> None:
    """Once per process: vLLM's model loader names the modules of every target model it loads."""
    from vllm.model_executor.model_loader.base_loader import BaseModelLoader

    name_modules_on_load(BaseModelLoader)


__all__ = ["install_module_names_hook", "name_modules_on_load"]
