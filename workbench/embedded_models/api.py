"""The embedded-models API: what `models`, `generate` and the notebooks call.

prepare("tiny")              # -> Path to a Qwen2 HF directory (random weights, seconds)
resolve_model("/my/ckpt")    # an embedded name is prepared, any HF directory works the same way
generate(GenerationRequest(model="tiny", prompt="Hello"))
"""

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
    DTYPES,
    Engine,
    FinishReason,
    GenerationRequest,
    GenerationResult,
    generate,
)

__all__ = [
    "DTYPES",
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
