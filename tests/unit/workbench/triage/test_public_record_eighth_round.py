"""Signatures the eighth round of the public record taught triage (development-half misses only, issue #47):
each log is a thread's own lines, with the family, code and fix the knowledge base gives it, and a log the
same words could wrongly catch."""

from __future__ import annotations

from tests.unit.workbench.triage.first_error import first_diagnosis, first_kind
from workbench.triage.api import triage_text
from workbench.triage.kinds import FailureKind

# hiyouga/LlamaFactory#7447 (fixed by LlamaFactory#7739): the launcher touched the NPU, then vLLM forked
FORKED = (
    "(VllmWorkerProcess pid=1743) ERROR 03-25 12:50:16 multiproc_worker_utils.py:242] RuntimeError: Cannot "
    "re-initialize NPU in forked subprocess. To use NPU with multiprocessing, you must use the 'spawn' start method\n"
)

# Ascend/cann-container-image#46: npu-smi inside a container whose card another holds
DEVICE_USED = """\
DrvMngGetConsoleLogLevel failed. (g_conLogLevel=3)
dcmi model initialized failed, because the device is used. ret is -8020
"""

# shirwy/vllm-ascend-910a#4: a bfloat16 model on a 910A, whose TransData has no bfloat16 kernel
NO_BF16_KERNEL = """\
[rank0]: [ERROR] 2025-09-28-03:43:47 (PID:9038, Device:0, RankID:-1) ERR00100 PTA call acl api failed.
[rank0]: E90003: [PID: 9038] 2025-09-28-03:43:47.761.546 Compile operator failed, cause: Template constraint, detailed information: bfloat16 of tbe.dsl.transdata is not supported.
[rank0]:         TraceBack (most recent call last):
[rank0]:         Failed to compile Op [trans_TransData_8,]. (oppath: [Compile /usr/local/Ascend/ascend-toolkit/8.1.RC1/opp/built-in/op_impl/ai_core/tbe/impl/dynamic/trans_data.py failed with errormsg/stack: File "/usr/local/Ascend/ascend-toolkit/latest/python/site-packages/tbe/dsl/compute/util.py", line 1886, in dtype_check_decorator
"""

# Ascend/pytorch#61: the fusion engine could not compile a graph's kernel under vLLM
GRAPH_COMPILE = """\
ERROR 03-04 12:57:08 [engine.py:409]         [SubGraphOpt][Compile][Normal] Failed to parse json or compress op for graph[partition0_rank1_new_sub_graph2].[FUNC:ReCompileWithNoFusionStrategy][FILE:op_compiler_normal.cc][LINE:86]
ERROR 03-04 12:57:08 [engine.py:409]         [GraphOpt][FusedGraph][RunCompile] Failed to compile graph with compiler Normal mode Op Compiler[FUNC:SubGraphCompile][FILE:fe_graph_optimizer.cc][LINE:1385]
"""


def test_a_worker_forked_after_the_parent_touched_the_npu_is_a_device_init_failure_fixed_by_spawn():
    diagnosis = first_diagnosis(FORKED)
    assert diagnosis.kind is FailureKind.DEVICE_INIT
    assert "VLLM_WORKER_MULTIPROC_METHOD=spawn" in diagnosis.fix


def test_the_cuda_fork_message_is_not_read_as_the_npu_one():
    log = "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method\n"
    report = triage_text(log, source="test")
    assert report.first is None or "VLLM_WORKER_MULTIPROC_METHOD" not in report.first.diagnosis.fix


def test_a_card_another_container_holds_is_a_device_init_failure():
    diagnosis = first_diagnosis(DEVICE_USED)
    assert diagnosis.kind is FailureKind.DEVICE_INIT
    assert "npu-smi info" in diagnosis.fix


def test_an_op_without_a_kernel_for_the_dtype_is_kernel_missing_with_cann_code_over_torch_npu_wrapper():
    diagnosis = first_diagnosis(NO_BF16_KERNEL)
    assert diagnosis.kind is FailureKind.KERNEL_MISSING
    assert str(diagnosis.code).startswith("E90003")
    assert "--dtype float16" in diagnosis.fix


def test_a_graph_the_fusion_engine_cannot_compile_is_a_compiler_failure():
    assert first_diagnosis(GRAPH_COMPILE).kind is FailureKind.COMPILER_POOL


def test_the_generic_graph_compile_line_does_not_outrank_the_line_that_names_the_dtype():
    """In one block the dtype line (kernel_missing, 86) says more than the fusion engine's failure (compiler_pool, 55)."""
    graph_lines = "".join(f"[rank0]: {line.split(']', 1)[1].strip()}\n" for line in GRAPH_COMPILE.splitlines())
    assert first_diagnosis(NO_BF16_KERNEL + graph_lines).kind is FailureKind.KERNEL_MISSING


def test_a_dtype_refused_by_a_setting_check_is_not_a_missing_kernel():
    log = "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. bfloat16 of the model is not supported\n"
    assert first_kind(log) is not FailureKind.KERNEL_MISSING
