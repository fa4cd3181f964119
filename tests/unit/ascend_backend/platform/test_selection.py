"""The kernel-selection table: coverage of every verified release, and the choices vllm-ascend's source shows.

Each expectation below names the vllm-ascend file and tag it comes from; the rows themselves carry the
same citations (ascend_backend/data/kernel_table.json).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from packaging.version import Version

from ascend_backend.platform.kernels import (
    CallFacts,
    ChipFamily,
    GraphMode,
    SelectionContext,
    chip_support,
    kernel_table,
    releases,
    select,
)
from ascend_backend.platform.kernels.recipes import RECIPES, STATES

ATTENTION = list(STATES)
TYPICAL = CallFacts(head_size=128, rotary_dim=128, neox=True, mrope_section=(16, 24, 24))


def ctx(
    release: str,
    chip: ChipFamily = ChipFamily.A2,
    graph: GraphMode = GraphMode.NONE,
    pa_shape: bool = False,
    cann: str | None = None,
) -> SelectionContext:
    return SelectionContext(Version(release), "test", (), chip, chip.value, cann, graph, pa_shape)


def kernel(op: str, release: str, call: CallFacts = TYPICAL, **kwargs) -> str:
    return select(op, ctx(release, **kwargs), call).kernel


MATRIX = [r for r in releases() if r.in_matrix]


def known(release: str, chip: ChipFamily) -> bool:
    return chip_support()[chip].covers(Version(release))


@pytest.mark.parametrize("release", [str(r.release) for r in MATRIX])
@pytest.mark.parametrize("chip", [ChipFamily.A2, ChipFamily.A3])
def test_every_matrix_release_has_an_npu_kernel_for_every_attention_state_on_a2_a3(release, chip):
    if not known(release, chip):
        pytest.skip(f"vllm-ascend v{release} does not know {chip.value}")
    for op in ATTENTION:
        choice = select(op, ctx(release, chip), TYPICAL)
        assert choice.row is not None, f"{op} v{release} {chip.value}: {choice.reason}"
        assert not choice.native, f"{op} v{release} {chip.value}: {choice.reason}"


@pytest.mark.parametrize("release", [str(r.release) for r in releases() if r.release >= Version("0.12.0rc1")])
def test_a5_has_a_row_for_every_attention_state_from_v0_12(release):
    for op in ATTENTION:
        assert select(op, ctx(release, ChipFamily.A5), TYPICAL).row is not None


@pytest.mark.parametrize(
    ("release", "chip"),
    [("0.11.0", ChipFamily.A5), ("0.8.5rc1", ChipFamily.A3), ("0.9.2rc1", ChipFamily.A3), ("0.9.1", ChipFamily.P310)],
)
def test_no_rows_where_vllm_ascend_does_not_know_the_chip(release, chip):
    # A5: AscendDeviceType._910_95 from utils.py@v0.12.0rc1; A3: AscendSocVersion.A3 from v0.9.1rc2 (not in
    # v0.9.2rc1, whose FAQ lists only A2 and 300I); 310P: the FAQ calls it unsupported up to v0.9.1.
    for op in (*ATTENTION, "rms_norm", "w8a8_linear"):
        choice = select(op, ctx(release, chip), TYPICAL)
        assert choice.native and choice.row is None and "does not know" in choice.reason and "chip=A2" in choice.reason


@pytest.mark.parametrize("release", ["0.9.2rc1", "0.11.0", "0.12.0rc1", "0.13.0", "0.14.0rc1", "0.23.0"])
def test_310p_attention_goes_native_where_vllm_ascend_builds_nz_layouts(release):
    for op in ATTENTION:
        choice = select(op, ctx(release, ChipFamily.P310), TYPICAL)
        assert choice.native and choice.row is not None and "NZ" in choice.row.differs


def test_310p_runs_the_kernels_vllm_ascend_runs_outside_attention():
    # activation.py@v0.13.0:40 (float32 SwiGLU), _310p/ops/activation.py@v0.15.0rc1:28 (32-aligned only),
    # _310p/ops/layernorm.py@v0.15.0rc1:14, _310p/ops/rotary_embedding.py@v0.15.0rc1:45, w8a8_static (310P)
    p310 = {"chip": ChipFamily.P310}
    assert select("silu_and_mul", ctx("0.13.0", **p310), TYPICAL).recipe == "npu_swiglu_fp32"
    assert kernel("silu_and_mul", "0.14.0rc1", **p310) == "native"
    assert kernel("silu_and_mul", "0.18.0", CallFacts(last_dim=37888), **p310) == "npu_swiglu"
    assert kernel("silu_and_mul", "0.18.0", CallFacts(last_dim=2000), **p310) == "native"
    assert select("add_rms_norm", ctx("0.14.0rc1", **p310), TYPICAL).recipe == "add_then_npu_rms_norm"
    assert select("add_rms_norm", ctx("0.15.0rc1", **p310), TYPICAL).recipe == "npu_add_rms_norm"
    assert kernel("rotary_embedding", "0.18.0", **p310) == "npu_apply_rotary_pos_emb"
    assert kernel("w8a8_linear", "0.18.0", **p310) == "npu_quantize + npu_quant_matmul"


def test_sliding_window_decode_is_refused_with_vllm_ascends_call_named():
    # attention_v1.py@v0.13.0:540 _forward_fia_slidingwindow (BSH, pre_tokens = the window)
    choice = select("paged_decode_attention", ctx("0.18.0"), CallFacts(head_size=128, sliding_window=True))
    assert choice.native and choice.row.id == "decode.sliding_window" and "window" in choice.row.differs
    assert kernel("paged_decode_attention", "0.9.1", CallFacts(head_size=128, sliding_window=True)) == (
        "_npu_paged_attention"
    )


def test_decode_left_paged_attention_in_v0_13():
    # attention_v1.py@v0.11.0 _forward_decode_only vs @v0.13.0 forward_impl -> forward_fused_infer_attention
    assert kernel("paged_decode_attention", "0.11.0") == "_npu_paged_attention"
    assert kernel("paged_decode_attention", "0.12.0rc1") == "_npu_paged_attention"
    assert kernel("paged_decode_attention", "0.13.0") == "npu_fused_infer_attention_score"
    assert kernel("paged_decode_attention", "0.18.0") == "npu_fused_infer_attention_score"


def test_full_decode_only_with_pa_shape_list_brings_paged_attention_back():
    # attention/utils.py@v0.13.0 using_paged_attention: FULL_DECODE_ONLY and the shape in pa_shape_list, never A5.
    full = {"graph": GraphMode.FULL_DECODE_ONLY}
    assert kernel("paged_decode_attention", "0.18.0", pa_shape=True, **full) == "_npu_paged_attention"
    assert kernel("paged_decode_attention", "0.18.0", pa_shape=False, **full) == "npu_fused_infer_attention_score"
    assert kernel("paged_decode_attention", "0.18.0", pa_shape=True) == "npu_fused_infer_attention_score"
    assert kernel("paged_decode_attention", "0.18.0", pa_shape=True, chip=ChipFamily.A5, **full) == (
        "npu_fused_infer_attention_score"
    )


def test_pa_shape_list_from_the_engine_is_matched_against_the_decode_batch_size():
    from dataclasses import replace

    context = replace(ctx("0.18.0", graph=GraphMode.FULL_DECODE_ONLY), pa_shape_list=(8, 16))
    assert select("paged_decode_attention", context, CallFacts(head_size=128, num_tokens=16)).kernel == (
        "_npu_paged_attention"
    )
    assert select("paged_decode_attention", context, CallFacts(head_size=128, num_tokens=12)).kernel == (
        "npu_fused_infer_attention_score"
    )


@pytest.mark.parametrize("mode", [GraphMode.TORCHAIR, GraphMode.XLITE])
def test_whole_model_graph_modes_are_refused_with_the_reason(mode):
    choice = select("paged_decode_attention", ctx("0.11.0", graph=mode), TYPICAL)
    assert choice.native and choice.row is None and mode.value in choice.reason
    assert "no torchair graph mode" in select("rms_norm", ctx("0.18.0", graph=GraphMode.TORCHAIR), TYPICAL).reason


def test_v0_12_captured_decode_runs_fia_eager_decode_runs_paged_attention():
    # attention_v1.py@v0.12.0rc1 forward_impl: full_graph_attention while capturing, _npu_paged_attention otherwise
    assert kernel("paged_decode_attention", "0.12.0rc1", graph=GraphMode.FULL_DECODE_ONLY) == (
        "npu_fused_infer_attention_score"
    )
    assert kernel("paged_decode_attention", "0.12.0rc1", graph=GraphMode.PIECEWISE) == "_npu_paged_attention"
    assert select("paged_decode_attention", ctx("0.12.0rc1", ChipFamily.A5), TYPICAL).recipe == "fia_tnd_paged_nomask"


def test_chunked_prefill_kernel_per_release():
    # splitfuse until v0.11.0rc0 (FIA there only with CANN 8.3), FIA from v0.11.0rc1 (attention_v1.py per tag)
    assert kernel("chunked_prefill_attention", "0.10.2rc1") == "_npu_paged_attention_splitfuse"
    assert kernel("chunked_prefill_attention", "0.11.0rc0", cann="8.2.RC1") == "_npu_paged_attention_splitfuse"
    assert kernel("chunked_prefill_attention", "0.11.0rc0", cann="8.3.RC1") == "npu_fused_infer_attention_score"
    assert kernel("chunked_prefill_attention", "0.11.0rc1") == "npu_fused_infer_attention_score"
    assert kernel("chunked_prefill_attention", "0.11.0") == "npu_fused_infer_attention_score"


def test_head_size_192_chunked_prefill_is_vanilla_pytorch_until_v0_12():
    h192 = CallFacts(head_size=192)
    assert kernel("chunked_prefill_attention", "0.8.4rc2", h192) == "native"
    assert kernel("chunked_prefill_attention", "0.11.0", h192) == "native"
    assert kernel("chunked_prefill_attention", "0.7.3", h192) == "_npu_paged_attention_splitfuse"
    assert kernel("chunked_prefill_attention", "0.12.0rc1", h192) == "npu_fused_infer_attention_score"


def test_head_size_512_from_v0_23_on_a2_a3():
    # attention/utils.py@v0.23.0 (decode -> PA) and device/utils.py@v0.23.0 (prefill -> npu_fusion_attention)
    h512 = CallFacts(head_size=512)
    assert kernel("paged_decode_attention", "0.23.0", h512) == "_npu_paged_attention"
    assert kernel("prefill_attention", "0.23.0", h512) == "npu_fusion_attention"
    assert kernel("chunked_prefill_attention", "0.23.0", h512) == "native"
    assert kernel("paged_decode_attention", "0.22.1rc1", h512) == "npu_fused_infer_attention_score"


def test_prefill_cache_hit_before_the_state_existed():
    # v0.8.4rc2 and v0.8.5rc1 have no PrefillCacheHit state: such batches ran as ChunkedPrefill
    assert kernel("prefill_cache_hit_attention", "0.8.5rc1") == "_npu_paged_attention_splitfuse"
    assert kernel("prefill_cache_hit_attention", "0.7.3") == "_npu_flash_attention_qlens"
    assert kernel("prefill_cache_hit_attention", "0.11.0") == "_npu_flash_attention_qlens"


def test_cache_write_by_chip_and_release():
    assert select("reshape_and_cache", ctx("0.11.0"), TYPICAL).recipe == "atb_reshape_and_cache"
    # A5 at v0.12.0rc1-v0.19.1rc1: vllm-ascend's call without cache_mode writes PA_NZ into the ND cache on the
    # torch_npu these releases pin (op-plugin 7.2.0/7.3.0 ScatterPaKvCacheNpuOpApi.cpp:33): native, not that call.
    for release in ("0.12.0rc1", "0.19.1rc1"):
        choice = select("reshape_and_cache", ctx(release, ChipFamily.A5), TYPICAL)
        assert choice.recipe == "native" and choice.row.id == "cache_write.a5_scatter" and "PA_NZ" in choice.row.differs
    assert select("reshape_and_cache", ctx("0.20.2rc1", ChipFamily.A5), TYPICAL).recipe == "scatter_pa_kv_cache_norm"
    assert select("reshape_and_cache", ctx("0.24.0rc1", ChipFamily.A3), TYPICAL).recipe == "atb_reshape_and_cache"
    assert select("reshape_and_cache", ctx("0.25.1rc1", ChipFamily.A3), TYPICAL).recipe == "scatter_pa_kv_cache_norm"


def test_vllm_ascends_own_qwen_models_rotate_with_apply_rotary_pos_emb_at_v091():
    # models/qwen3.py@v0.9.1:168 and qwen2.py@v0.9.1:94 hand cos/sin to rope_forward_oot (is_cos_sin_cached),
    # which calls npu_apply_rotary_pos_emb for neox 128/128 (ops/rotary_embedding.py@v0.9.1:73).
    for arch in ("Qwen2ForCausalLM", "Qwen3ForCausalLM"):
        context = replace(ctx("0.9.1"), architecture=arch)
        assert select("rotary_embedding", context, TYPICAL).recipe == "apply_rotary_pos_emb"
    other = replace(ctx("0.9.1"), architecture="LlamaForCausalLM")
    assert select("rotary_embedding", other, TYPICAL).recipe == "atb_rope"
    assert (
        select("rotary_embedding", replace(ctx("0.9.2rc1"), architecture="Qwen3ForCausalLM"), TYPICAL).recipe
        == "atb_rope"
    )


def test_fia_rows_at_v019_to_v021_make_the_causal_call():
    # The *_tokens rows cited attention_v1.py@v0.19.1rc1:916, the attention-sinks branch; the causal call (:944)
    # passes no pre_tokens/next_tokens: the plain FIA recipes serve those releases.
    for op in (
        "prefill_attention",
        "prefill_cache_hit_attention",
        "paged_decode_attention",
        "chunked_prefill_attention",
    ):
        for release in ("0.19.1rc1", "0.21.0rc1"):
            assert select(op, ctx(release), TYPICAL).recipe in ("fia_tnd_dense", "fia_tnd_paged"), (op, release)


def test_rotary_kernel_per_release_and_shape():
    full, partial, gptj = TYPICAL, CallFacts(head_size=128, rotary_dim=64, neox=True), CallFacts(128, 128, False)
    assert kernel("rotary_embedding", "0.7.3", partial) == "native"  # forward_native (rotary_embedding.py@v0.7.3)
    assert kernel("rotary_embedding", "0.9.1", partial) == "native"  # the whole-head call is not reproduced
    assert kernel("rotary_embedding", "0.10.1rc1", partial) == "_npu_rotary_embedding"
    assert kernel("rotary_embedding", "0.11.0", full) == "npu_apply_rotary_pos_emb"
    assert kernel("rotary_embedding", "0.11.0", gptj) == "_npu_rotary_embedding"
    assert kernel("rotary_embedding", "0.18.0", full) == "_npu_rotary_embedding"
    assert kernel("rotary_embedding", "0.26.0", full) == "npu_mrope"  # main@182b75e: npu_mrope without Triton
    # v0.13.0rc3 (its own branch) routes every call through Triton; v0.13.0 still prepares cos/sin outside
    assert kernel("rotary_embedding", "0.13.0rc3", full) == "_npu_rotary_embedding"
    assert kernel("rotary_embedding", "0.13.0", full) == "npu_apply_rotary_pos_emb"
    # vllm-ascend's defaults there are its own kernels; the rows say so
    assert "rope_forward_triton" in select("rotary_embedding", ctx("0.18.0"), full).row.vllm_default


def test_mrope_only_for_qwen2_vl_sections_from_v0_11():
    other = CallFacts(head_size=64, rotary_dim=64, neox=True, mrope_section=(8, 12, 12))
    assert kernel("mrope", "0.11.0") == "npu_mrope"
    assert kernel("mrope", "0.11.0", other) == "native"
    assert kernel("mrope", "0.10.2rc1") == "native"
    assert kernel("mrope", "0.9.1", other) == "npu_mrope"
    # rotary_embedding.py@v0.17.0rc1:522: A5 goes to vLLM's native M-RoPE until v0.18.0rc1
    assert kernel("mrope", "0.17.0rc1", chip=ChipFamily.A5) == "native"
    assert kernel("mrope", "0.18.0rc1", chip=ChipFamily.A5) == "npu_mrope"


def test_quick_gelu_and_gemma_norm():
    assert kernel("quick_gelu", "0.8.4rc2") == "native" and kernel("quick_gelu", "0.8.5rc1") == "npu_fast_gelu"
    assert kernel("gemma_rms_norm", "0.10.2rc1") == "native" and kernel("gemma_rms_norm", "0.11.0rc0") == "npu_rms_norm"
    assert select("add_rms_norm", ctx("0.13.0", ChipFamily.P310), TYPICAL).recipe == "add_then_npu_rms_norm"
    assert kernel("gelu", "0.23.0") == "native"
    # layernorm.py@v0.16.0rc1:90: vllm-ascend's own kernel with no torch_npu path; the nearest one runs here
    row = select("gemma_rms_norm", ctx("0.18.0"), TYPICAL).row
    assert row.kernel == "npu_rms_norm" and "npu_gemma_rms_norm" in row.vllm_default and row.differs


def test_w8a8_static_quantizes_by_division_in_v0_8_and_by_the_reciprocal_from_v0_9():
    # quantization/w8a8.py: npu_quantize(..., True) with the scale and the int8 offset @v0.8.5rc1;
    # (..., False) with 1 / scale and the offset in the model dtype from @v0.9.0rc1 (and on main).
    recipe = {r: select("w8a8_linear", ctx(r), TYPICAL).recipe for r in ("0.8.4rc2", "0.8.5rc1", "0.9.0rc1", "0.26.0")}
    assert recipe == {
        "0.8.4rc2": "quantize_divide",
        "0.8.5rc1": "quantize_divide",
        "0.9.0rc1": "quantize_reciprocal",
        "0.26.0": "quantize_reciprocal",
    }
    assert kernel("w8a8_linear", "0.18.0") == "npu_quantize + npu_quant_matmul"
    assert kernel("w8a8_dynamic_linear", "0.8.4rc2") == "npu_dynamic_quant + npu_quant_matmul"
    assert kernel("w8a8_dynamic_linear", "0.25.1rc1", chip=ChipFamily.A5) == "npu_dynamic_quant + npu_quant_matmul"


def test_w8a8_before_vllm_ascend_had_its_own_and_its_forms_after():
    # v0.7.3: quantizer.py hands quantization to MindIE Turbo; w8a8_static.py@v0.18.0:133 skips the quantize
    # for int8 input; compressed-tensors from w8a8.py@v0.12.0rc1:160; dst_type from w8a8_dynamic.py@v0.22.1rc1:82.
    for op in ("w8a8_linear", "w8a8_dynamic_linear"):
        choice = select(op, ctx("0.7.3"), TYPICAL)
        assert choice.native and "MindIE Turbo" in choice.row.differs
    assert select("w8a8_linear", ctx("0.18.0"), CallFacts(prequantized=True)).recipe == "quant_matmul_prequantized"
    ct = SelectionContext(Version("0.18.0"), "t", (), ChipFamily.A2, "A2", None, checkpoint="compressed-tensors")
    assert select("w8a8_linear", ct, TYPICAL).recipe == "quantize_reciprocal_float_bias"
    assert select("w8a8_dynamic_linear", ctx("0.21.0rc1"), TYPICAL).recipe == "dynamic_quant"
    assert select("w8a8_dynamic_linear", ctx("0.22.1rc1"), TYPICAL).recipe == "dynamic_quant_int8"


def test_w8a16_and_w4a8_are_refused_with_the_reason():
    for op in ("w8a16_linear", "w4a8_linear"):
        choice = select(op, ctx("0.18.0"), TYPICAL)
        assert (
            choice.native and choice.reason.startswith("refused:") and "npu_weight_quant_batchmatmul" in choice.reason
        )


def test_unknown_release_goes_native_with_the_reason():
    context = SelectionContext(None, "neither vllm-ascend nor torch_npu is installed", (), ChipFamily.A2, "A2", None)
    choice = select("rms_norm", context, TYPICAL)
    assert choice.native and "neither vllm-ascend nor torch_npu" in choice.reason


def test_pins_win_over_rows():
    context = SelectionContext(
        Version("0.18.0"), "t", (), ChipFamily.A2, "A2", None, pins=(("paged_decode_attention", "atb_paged_attention"),)
    )
    choice = select("paged_decode_attention", context, TYPICAL)
    assert choice.kernel == "_npu_paged_attention" and choice.row is None and "pinned" in choice.reason


def test_table_rows_are_well_formed_and_cited():
    for row in kernel_table():
        assert row.op in RECIPES
        assert row.source.startswith("vllm_ascend/") and row.source.endswith(".py"), row.id
        assert row.tag.startswith("v0.") or row.tag.startswith("main@"), row.id
        assert row.where and row.vllm_ascend, row.id
        if row.recipe == "native":
            assert row.note or row.differs or row.vllm_ascend != "same", f"{row.id}: a native row says why"
        if row.vllm_default:
            assert row.recipe != "native", f"{row.id}: the torch_npu path of an own-kernel default is named"
