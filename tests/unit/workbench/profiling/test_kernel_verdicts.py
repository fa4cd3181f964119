"""Kernel verdicts from Ascend's counters on the real samples the project ships; every number checked is in the file.

kernel_details_pipe_utilization.csv and msprof_op_summary_ut_expected_pipeutil.csv come from msprof-analyze's and
msprof's own tests, kernel_details_with_aic_metrics_trimmed.csv from msprof-analyze's advisor tests (SOURCES.md).
"""

from __future__ import annotations

import pytest

from workbench.errors import WorkbenchError
from workbench.profiling.kernel_verdicts import (
    CoreCounts,
    KernelFinding,
    framework_bucket,
    judge_kernels,
    load_kernel_rules,
    verdicts_frame,
)

F = KernelFinding


def by_kernel(verdicts, kernel, shapes_start=""):
    return next(v for v in verdicts if v.kernel == kernel and v.shapes.startswith(shapes_start))


def test_the_pipe_utilization_sample(fixtures):
    verdicts = judge_kernels(fixtures / "samples" / "kernel_details_pipe_utilization.csv")
    matmul_v2 = by_kernel(verdicts, "MatMulV2")
    # four rows: aic_mac_ratio 0.824 0.825 0.819 0.811 (mean 0.81975 >= 0.8); aic_mte2_ratio mean 0.9665 >= 0.95
    assert matmul_v2.calls == 4 and matmul_v2.ratios["aic_mac_ratio"] == pytest.approx(0.81975)
    assert matmul_v2.findings == (F.CUBE_BOUND, F.MEMORY_BOUND)
    aligned = by_kernel(verdicts, "MatMulV3", "81920,1536")  # mac 0.733, mte2 0.941: under both limits
    assert aligned.findings == (F.NO_BOUND,) and "room 7%" in aligned.evidence[0].counter
    unaligned = by_kernel(verdicts, "MatMulV3", "8192,15365")  # 15365 is not a multiple of 256
    assert unaligned.findings[0] is F.UNALIGNED and "15365" in unaligned.evidence[0].counter
    attention = by_kernel(verdicts, "FlashAttentionScore", "4096,2,512;")  # MIX_AIC: aic_scalar_ratio 0.962
    assert attention.findings == (F.SCALAR_BOUND, F.MEMORY_BOUND)
    add = by_kernel(verdicts, "Add", "512,2,4096")  # 0.247 + 0.842 + 0.132 = 1.221 >= 0.9, MTE2 leading
    assert add.findings == (F.PIPES_SATURATED,) and "aiv_mte2_ratio leads" in add.evidence[0].counter
    assert all(v.share >= load_kernel_rules().hot_share for v in verdicts)  # the 1.4 us Adds are not hot
    assert all("msprof_analyze/advisor" in e.source for v in verdicts for e in v.evidence)


def test_a_hot_kernel_is_joined_to_the_kernel_table_row_that_makes_its_call(fixtures):
    verdicts = judge_kernels(fixtures / "samples" / "kernel_details_pipe_utilization.csv")
    attention = by_kernel(verdicts, "FlashAttentionScore", "4096,2,512;")
    assert attention.table_rows and all("npu_fusion_attention" in row for row in attention.table_rows)
    assert all("vllm_ascend/" in row and "@v" in row for row in attention.table_rows)
    assert by_kernel(verdicts, "MatMulV2").table_rows == ()  # a plain torch matmul: no table row


def test_the_aic_metrics_sample_with_core_counts(fixtures):
    verdicts = judge_kernels(fixtures / "samples" / "kernel_details_with_aic_metrics_trimmed.csv", CoreCounts(24, 48))
    cast = by_kernel(verdicts, "Cast")  # trans_Cast_5: AI_CPU, 197.54 us
    assert set(cast.findings) == {F.FORMAT, F.AI_CPU} and "197.5 us > 20 us" in cast.evidence[1].counter
    tril = by_kernel(verdicts, "Tril")  # block dim 24 on the vector cores
    assert tril.findings == (F.LOW_BLOCK_DIM,) and "48 vector cores" in tril.evidence[0].counter
    assert F.LOW_BLOCK_DIM not in by_kernel(verdicts, "ZerosLike").findings  # block dim 48
    assert all(v.core != "HCCL" for v in verdicts)  # hcom tasks are communication, not kernels
    assert framework_bucket(verdicts)["format conversion"] == pytest.approx(197.54)


def test_without_core_counts_the_block_dim_is_not_judged(fixtures):
    verdicts = judge_kernels(fixtures / "samples" / "kernel_details_with_aic_metrics_trimmed.csv")
    assert all(F.LOW_BLOCK_DIM not in v.findings for v in verdicts)


def test_msprofs_op_summary_with_empty_type_columns(fixtures):
    (matmul,) = judge_kernels(fixtures / "samples" / "msprof_op_summary_ut_expected_pipeutil.csv")
    # OP Type and Task Type are empty: the kernel is the name's stem, the core the one its counters belong to
    assert (matmul.kernel, matmul.core, matmul.calls) == ("MatMulV3", "AI_CORE", 3)
    assert matmul.ratios["aic_mac_ratio"] == pytest.approx(0.236) and matmul.findings == (F.NO_BOUND,)


def test_framework_conversions_without_counters(fixtures):
    verdicts = judge_kernels(fixtures / "samples" / "kernel_details_minimal_columns.csv")
    formats = {v.kernel for v in verdicts if F.FORMAT in v.findings}
    assert formats == {"trans_TransData", "trans_Cast"}
    # trans_Cast_19 5.86 + trans_TransData_20 7.77 + trans_Cast_21 4.35 + trans_TransData_22 23.98
    assert framework_bucket(verdicts)["format conversion"] == pytest.approx(5.86 + 7.77 + 4.35 + 23.98)
    assert list(verdicts_frame(verdicts).columns)[:3] == ["kernel", "core", "shapes"]


def test_a_file_without_durations_is_one_clear_error(tmp_path):
    path = tmp_path / "kernel_details.csv"
    path.write_text("Name,Type,Duration(us)\nfoo,Bar,N/A\n")
    with pytest.raises(WorkbenchError, match="no device task with a duration"):
        judge_kernels(path)
