"""Where a result came from: the one stamp every result file the workbench writes carries.

A number without its stack is an orphan: operator behaviour and speed shift between CANN, torch_npu and
vllm-ascend versions (docs/METHOD.md §2, §16), so a bench JSON, a sweep point, a bisect step, a profile
or an accuracy report is only comparable with another taken on the same stack. `provenance(...)` is
the single function that builds the stamp, and `workbench.results.envelope` the one place it goes in a
file (under "provenance"):

    {"created_at": "...", "stack": {...}, "device": "cpu", "url": ..., "model": ...,
     "server_vllm_version": ..., "recipe": {...}, "recipe_hash": "...", "model_hashes": {...}}

`stack` is the stack fingerprint (`workbench.stack.fingerprint`); `model_hashes` the content hashes of
the model directory measured (`workbench.stack.model_hashes`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench import settings
from workbench.recipes.serving import stable_hash
from workbench.stack.fingerprint import stack

if TYPE_CHECKING:
    from workbench.recipes.serving import ServingRecipe


def _model_directory(recipe: ServingRecipe | None, model: str | None, model_dir: Path | str | None) -> Path | None:
    """The local directory of the model measured, when there is one (never prepares or downloads)."""
    if model_dir is not None:
        return Path(model_dir)
    if recipe is not None and recipe.embedded_model is not None:
        return settings.embedded_model_dir(recipe.embedded_model)
    candidate = (recipe.local_model_path() if recipe is not None else None) or (Path(model) if model else None)
    return candidate if candidate is not None and candidate.is_dir() else None


def model_record(directory: Path) -> dict[str, Any]:
    """Content hashes of a model directory; an unreadable one is recorded as such, never raised."""
    from workbench.stack.model_hashes import model_hashes

    try:
        return model_hashes(directory).to_dict()
    except OSError as exc:
        return {"path": str(directory), "error": f"{type(exc).__name__}: {exc}"}


def provenance(
    *,
    recipe: ServingRecipe | None = None,
    url: str | None = None,
    model: str | None = None,
    server_version: str | None = None,
    model_dir: Path | str | None = None,
    device: str | None = None,
) -> dict[str, Any]:
    """The stamp for one result: the stack, and the server, recipe and model it measured where known.

    `model_dir` names the model directory when neither the recipe nor `model` leads to it; `device`
    says where an accuracy run ran (a recipe's own device is used otherwise).
    """
    record: dict[str, Any] = {"created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "stack": stack()}
    if recipe is not None:
        record["device"] = recipe.device.value
        record["recipe"] = recipe.model_dump(mode="json")
        record["recipe_hash"] = stable_hash(recipe.identity())
    if device is not None:
        record["device"] = device
    if url is not None:
        record["url"] = url
    if model is not None:
        record["model"] = model
    if server_version is not None:
        record["server_vllm_version"] = server_version
    directory = _model_directory(recipe, model, model_dir)
    if directory is not None and directory.is_dir():
        record["model_hashes"] = model_record(directory)
    return record
