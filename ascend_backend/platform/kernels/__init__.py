"""Which torch_npu kernel each op runs: the kernel-selection table, read from vllm-ascend's source per release.

    from ascend_backend.platform import kernels
    kernels.active_context().describe()     # release, chip, CANN, graph mode, and how each was found
    kernels.choose("paged_decode_attention") # KernelChoice(kernel, recipe, row, reason)
    kernels.set_provider(get_vllm_config)    # inside vLLM: the engine's graph mode, pa_shape_list, architecture

The NPU adapters (`ascend_backend.npu.adapters`, through the guard of `ascend_backend.npu.guard`) ask
`choose` for every call and make the call of the chosen recipe; `ASCEND_BACKEND_KERNELS` overrides the
context or pins a recipe.
"""

from ascend_backend.platform.kernels.context import OVERRIDE_VAR, SelectionContext, StackFacts, chip_family
from ascend_backend.platform.kernels.engine import EngineFacts, engine_facts, facts_from_vllm_config, set_provider
from ascend_backend.platform.kernels.recipes import NATIVE, RECIPES, REFUSED, STATES, calls, kernel_of, label
from ascend_backend.platform.kernels.selection import (
    TYPICAL_CALL,
    CallFacts,
    KernelChoice,
    active_context,
    choose,
    context_for_stack,
    explain,
    kernels_typical,
    select,
)
from ascend_backend.platform.kernels.table import ChipFamily, GraphMode, KernelRow, chip_support, kernel_table, releases

__all__ = [
    "NATIVE",
    "OVERRIDE_VAR",
    "RECIPES",
    "REFUSED",
    "EngineFacts",
    "chip_support",
    "engine_facts",
    "facts_from_vllm_config",
    "set_provider",
    "STATES",
    "TYPICAL_CALL",
    "CallFacts",
    "ChipFamily",
    "GraphMode",
    "KernelChoice",
    "KernelRow",
    "SelectionContext",
    "StackFacts",
    "active_context",
    "calls",
    "chip_family",
    "choose",
    "context_for_stack",
    "explain",
    "kernel_of",
    "kernel_table",
    "kernels_typical",
    "label",
    "releases",
    "select",
]
