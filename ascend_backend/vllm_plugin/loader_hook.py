"""One way to act on the model vLLM loads: wrap `BaseModelLoader.load_model` and call back on the target model.

vLLM's runners (and vllm-ascend's) build the model through `get_model` -> `model_loader.load_model`
(vllm/model_executor/model_loader/base_loader.py at 0.32), in every worker process and on every platform,
so wrapping that one method reaches the loaded model wherever it lives. The callback gets the target
model only: a speculative-decoding drafter is loaded with a model config of its own. The engine dump
(`dump`) and the fault injection's module names (`module_names`) both go through here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from torch import nn

ModelCallback = Callable[[nn.Module, Any], None]  # (the loaded model, its vLLM ModelConfig)


def loader_arguments(args: tuple, kwargs: dict) -> tuple[Any, Any]:
    """(vllm_config, model_config) of `load_model(vllm_config, model_config, prefix="")`."""
    vllm_config = kwargs.get("vllm_config", args[0] if args else None)
    model_config = kwargs.get("model_config", args[1] if len(args) > 1 else None)
    return vllm_config, model_config


def on_target_model_load(loader_class: Any, callback: ModelCallback) -> None:
    """Wrap `loader_class.load_model` so `callback(model, model_config)` runs on every target model it loads."""
    original = loader_class.load_model

    @functools.wraps(original)
    def load_model(self, *args: Any, **kwargs: Any) -> nn.Module:
        model = original(self, *args, **kwargs)
        vllm_config, model_config = loader_arguments(args, kwargs)
        if vllm_config is not None and model_config is vllm_config.model_config:
            callback(model, model_config)
        return model

    loader_class.load_model = load_model


def on_vllm_model_load(callback: ModelCallback) -> None:
    """`on_target_model_load` on vLLM's own `BaseModelLoader` (imported here: this needs vLLM)."""
    from vllm.model_executor.model_loader.base_loader import BaseModelLoader

    on_target_model_load(BaseModelLoader, callback)


__all__ = ["loader_arguments", "on_target_model_load", "on_vllm_model_load"]
