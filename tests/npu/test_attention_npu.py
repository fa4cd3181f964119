"""Attention on a real Ascend NPU: each kernel family runs (counted), matches native float32, leaves inputs alone.

A family is one vllm-ascend release's set of calls, chosen with ASCEND_BACKEND_KERNELS in a fresh
process per family and dtype (tests/npu/worker.py): the per-state ATB kernels of v0.10.2rc1, the FIA
calls of v0.18.0, v0.18.0 under FULL_DECODE_ONLY with the batch in pa_shape_list (decode back on
_npu_paged_attention), v0.20.2rc1's FIA calls on torch_npu 2.10 and the scatter cache write of
v0.25.1rc1. Inputs have block size 128 and cached prefixes in whole blocks (the kernels' documented
limits, ascend_backend/data/kernel_limits.json). A family is skipped only where the
installed torch_npu lacks its kernels. Head sizes 64 and 128 run the kernels; head size 192 is refused by
the v0.10.2rc1 ChunkedPrefill row (vllm-ascend ran vanilla PyTorch there) and must be counted native.
"""

from __future__ import annotations

import pytest

from tests.npu.runs import torch_npu_has, worker

pytestmark = pytest.mark.npu

TOL = {"float16": 5e-3, "bfloat16": 4e-2}
FAMILIES = {
    "atb": ("release=0.10.2rc1,chip=A2", ()),
    "fia": ("release=0.18.0,chip=A2", ("npu_fused_infer_attention_score",)),
    "fia_pa_graph": ("release=0.18.0,chip=A2,graph=FULL_DECODE_ONLY,pa_shape=1", ("npu_fused_infer_attention_score",)),
    "fia_v020": ("release=0.20.2rc1,chip=A2", ("npu_fused_infer_attention_score",)),
    "scatter": ("release=0.25.1rc1,chip=A2", ("npu_scatter_pa_kv_cache", "npu_fused_infer_attention_score")),
}
EXPECTED_KERNELS = {
    "atb": {
        "reshape_and_cache": "_npu_reshape_and_cache",
        "prefill_attention": "_npu_flash_attention",
        "prefill_cache_hit_attention": "_npu_flash_attention_qlens",
        "paged_decode_attention": "_npu_paged_attention",
        "chunked_prefill_attention": "_npu_paged_attention_splitfuse",
    },
    "fia": {
        "reshape_and_cache": "_npu_reshape_and_cache",
        "paged_decode_attention": "npu_fused_infer_attention_score",
        "chunked_prefill_attention": "npu_fused_infer_attention_score",
    },
    "fia_pa_graph": {"paged_decode_attention": "_npu_paged_attention"},
    "fia_v020": {
        "prefill_attention": "npu_fused_infer_attention_score",
        "paged_decode_attention": "npu_fused_infer_attention_score",
        "chunked_prefill_attention": "npu_fused_infer_attention_score",
    },
    "scatter": {"reshape_and_cache": "npu_scatter_pa_kv_cache"},
}


def results(family: str, dtype: str, heads: str = "64,128") -> tuple[dict, ...]:
    override, needs = FAMILIES[family]
    if needs and not torch_npu_has(*needs):
        pytest.skip(f"the installed torch_npu has no {', '.join(needs)}")
    return worker(override, dtype, "attention", heads)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_state_runs_the_npu_kernel_and_matches_native(family, dtype):
    for r in results(family, dtype):
        label = f"{family} {r['op']} head {r['facts']['head_size']}"
        assert r["counts"] == {"npu": 1}, f"{label}: the NPU kernel did not run: {r['counts']}"
        assert r["torch_npu_calls"] == {r["table_kernel"]: 1}, f"{label}: called {r['torch_npu_calls']}"
        assert r["max_abs_err"] <= TOL[dtype], f"{label}: max abs error {r['max_abs_err']}"
        assert r["unchanged"], f"{label}: an input tensor was modified"


@pytest.mark.parametrize("family", list(FAMILIES))
def test_each_family_makes_the_calls_of_its_release(family):
    by_op = {r["op"]: r for r in results(family, "float16") if r["facts"]["head_size"] == 128}
    for op, kernel in EXPECTED_KERNELS[family].items():
        assert by_op[op]["torch_npu_calls"] == {kernel: 1}, f"{family} {op}: {by_op[op]['torch_npu_calls']}"


def test_head_size_192_chunked_prefill_is_refused_and_served_native():
    for r in results("atb", "bfloat16", heads="192"):
        if r["op"] == "chunked_prefill_attention":
            assert r["counts"] == {"native": 1} and r["torch_npu_calls"] == {} and r["row"] == "chunked.head192_vanilla"
        else:
            assert r["counts"] == {"npu": 1}
        assert r["max_abs_err"] <= TOL["bfloat16"] and r["unchanged"]


def test_float32_is_served_native_everywhere():
    for r in worker(FAMILIES["atb"][0], "float32", "attention", "128"):
        assert r["counts"] == {"native": 1} and r["torch_npu_calls"] == {}
