"""The kernels' documented limits as data, and the guard that keeps calls inside them (data/kernel_limits.json)."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from ascend_backend.platform.kernels import ChipFamily, calls, kernel_table
from ascend_backend.platform.limits import CHECKS, CallShape, limits, quant_matmul_combinations, violation

PREFIX_ENCODER = ("_npu_flash_attention_qlens",)
FIA = ("npu_fused_infer_attention_score",)


def paged(**changes) -> CallShape:
    """A PrefillCacheHit call of a Llama-style layer: 128-wide heads, 8 over 2 KV heads, block 128."""
    base = dict(dtype="float16", head_size=128, block_size=128, num_heads=8, num_kv_heads=2, paged=True)
    base.update(max_query_len=128, prefix_lens=(128, 0))
    return CallShape(**{**base, **changes})


def test_every_limit_is_cited_and_readable():
    table = limits()
    assert table, "kernel_limits.json has no limits"
    for kernel, items in table.items():
        for limit in items:
            assert limit.check in CHECKS and limit.source and limit.text, f"{kernel} {limit.id}"
    assert len({limit.id for items in table.values() for limit in items}) == sum(map(len, table.values()))


def test_every_limited_kernel_is_a_kernel_the_table_calls():
    called = {name for row in kernel_table() for name in calls(row.kernel)}
    assert set(limits()) <= called


def test_the_prefix_encoder_takes_block_size_128_only():
    assert violation(PREFIX_ENCODER, paged(), ChipFamily.A2) is None
    why = violation(PREFIX_ENCODER, paged(block_size=32), ChipFamily.A2)
    assert why.startswith("block size 32:") and "_atb_api_docs.py" in why


@pytest.mark.parametrize(
    ("changes", "broken"),
    [
        ({"head_size": 192}, "head size 192"),
        ({"prefix_lens": (100, 0)}, "a cached prefix"),
        ({"num_heads": 9, "num_kv_heads": 2}, "9 heads over 2 KV heads"),
    ],
)
def test_the_prefix_encoder_limits_on_heads_and_prefixes(changes, broken):
    assert violation(PREFIX_ENCODER, paged(**changes), ChipFamily.A2).startswith(broken)


def test_fia_block_size_depends_on_its_branch():
    # The docs' two statements: prefill (a query longer than one token) needs multiples of 128 up to 512,
    # decode (every query one token) 16-aligned up to 512.
    assert violation(FIA, paged(block_size=32), ChipFamily.A2).startswith("block size 32")
    assert violation(FIA, paged(block_size=32, max_query_len=1, prefix_lens=None), ChipFamily.A2) is None
    assert violation(FIA, paged(block_size=256), ChipFamily.A2) is None
    assert violation(FIA, paged(block_size=1024, max_query_len=1), ChipFamily.A2).startswith("block size 1024")
    dense = CallShape(dtype="float16", head_size=128, num_heads=8, num_kv_heads=2, max_query_len=7, paged=False)
    assert violation(FIA, dense, ChipFamily.A2) is None  # no block table: no block-size limit


def test_atb_paged_attention_large_heads_need_small_blocks():
    decode = CallShape(dtype="bfloat16", head_size=512, block_size=128, num_heads=8, num_kv_heads=1, max_query_len=1)
    assert violation(("_npu_paged_attention",), decode, ChipFamily.A2) is None
    big = CallShape(**{**decode.__dict__, "block_size": 256})
    assert violation(("_npu_paged_attention",), big, ChipFamily.A2).startswith("block size 256")


def test_npu_mrope_alignment_and_chips():
    ok = CallShape(dtype="bfloat16", head_size=128, rotary_dim=128)
    assert violation(("npu_mrope",), ok, ChipFamily.A3) is None
    assert violation(("npu_mrope",), CallShape(dtype="bfloat16", head_size=80, rotary_dim=80), ChipFamily.A2)
    assert violation(("npu_mrope",), CallShape(dtype="float32", head_size=80, rotary_dim=80), ChipFamily.A2) is None
    assert violation(("npu_mrope",), ok, ChipFamily.A5).startswith("chip A5")


def test_quant_matmul_dtype_table_per_chip():
    a2, p310 = quant_matmul_combinations(ChipFamily.A2), quant_matmul_combinations(ChipFamily.P310)
    assert quant_matmul_combinations(ChipFamily.A3) == a2
    float16_rows = [row for row in a2 if row[-1] == ("float16",) and row[0] == ("int8",)]
    assert all("float16" not in row[2] for row in float16_rows)  # no float16 scale for float16 output
    assert all(row[5] == (None,) for row in p310)  # no per-token scale on 310P


def test_the_file_records_where_vllm_ascend_departs():
    raw = json.loads(resources.files("ascend_backend").joinpath("data", "kernel_limits.json").read_text())
    departures = raw["kernels"]["npu_quant_matmul"]["dtypes"]["departures"]
    assert any("7443" in d["source"] for d in departures)
