"""The embedded_models API: what the `ascend-workbench` verb and the notebook call (see the package docstring)."""

from __future__ import annotations

from workbench.embedded_models.catalog import (
    EmbeddedModel,
    ModelStatus,
    list_models,
    model_dir,
    model_recipe,
    prepare,
    resolve_model,
    status,
)
from workbench.embedded_models.generation import (
    Engine,
    FinishReason,
    GenerationRequest,
    GenerationResult,
    generate,
)

__all__ = [
    "EmbeddedModel",
    "Engine",
    "FinishReason",
    "GenerationRequest",
    "GenerationResult",
    "ModelStatus",
    "generate",
    "list_models",
    "model_dir",
    "model_recipe",
    "prepare",
    "resolve_model",
    "status",
]
