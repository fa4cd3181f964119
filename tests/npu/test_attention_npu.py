"""Attention NPU adapters against the native reference on a real Ascend NPU (skipped elsewhere).

Same batches as the unit tests (shuffled block tables, context lengths off block boundaries, GQA
ratios 1/4/8) at the block size vllm-ascend uses, 128. Native runs on CPU from the same inputs.
"""

from __future__ import annotations

import pytest
import torch

from ascend_backend.attention import ATTENTION_OPS, allocate_kv_cache
from ascend_backend.registry import REGISTRY, Backend
from tests.unit.attention.reference import make_paged_batch

pytestmark = pytest.mark.npu

NPU = "npu:0"  # a string: torch.device("npu") needs torch_npu imported
TOL = {torch.float16: (5e-3, 5e-3), torch.bfloat16: (4e-2, 4e-2)}
DTYPES = [torch.float16, torch.bfloat16]
GROUPS = [1, 4, 8]
BLOCK, KV_HEADS, HEAD = 128, 2, 128


def both(op, *args):
    """(native on CPU, registry's choice on the NPU) for the same CPU arguments."""
    expected = REGISTRY.impl(op, Backend.NATIVE)(*args)
    on_npu = [a.to(NPU) if isinstance(a, torch.Tensor) and a.dim() > 1 else a for a in args]
    return expected, REGISTRY.dispatch(op, NPU, *on_npu)


def close(actual, expected, dtype):
    atol, rtol = TOL[dtype]
    torch.testing.assert_close(actual.cpu().float(), expected.float(), atol=atol, rtol=rtol)


@pytest.mark.parametrize("op", ATTENTION_OPS)
def test_npu_kernel_is_selected(op):
    assert REGISTRY.select(op, NPU).backend is Backend.NPU


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_reshape_and_cache_writes_the_same_slots(dtype):
    cache = allocate_kv_cache(6, BLOCK, KV_HEADS, HEAD, dtype=dtype)
    slots = torch.tensor([700, 3, 129, 255, 0, 640], dtype=torch.int32)
    key = torch.randn(6, KV_HEADS, HEAD).to(dtype)
    value = torch.randn(6, KV_HEADS, HEAD).to(dtype)
    npu_cache = cache.to(NPU)
    REGISTRY.impl("reshape_and_cache", Backend.NATIVE)(key, value, cache, slots)
    REGISTRY.dispatch("reshape_and_cache", NPU, key.to(NPU), value.to(NPU), npu_cache, slots.to(NPU))
    assert torch.equal(npu_cache.cpu(), cache)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("group", GROUPS)
def test_paged_decode(dtype, group):
    lens = [1, 127, 128, 129, 300]
    batch = make_paged_batch(lens, BLOCK, KV_HEADS, HEAD, dtype, seed=group, padding=0)
    query = torch.randn(len(lens), KV_HEADS * group, HEAD).to(dtype)
    expected, actual = both("paged_decode_attention", query, batch.kv_cache, batch.block_tables,
                            torch.tensor(lens, dtype=torch.int32), HEAD ** -0.5)
    close(actual, expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("group", GROUPS)
def test_prefill_no_cache(dtype, group):
    lens = [1, 17, 128, 200]
    batch = make_paged_batch(lens, BLOCK, KV_HEADS, HEAD, dtype, seed=group, padding=0)
    query = torch.randn(sum(lens), KV_HEADS * group, HEAD).to(dtype)
    expected, actual = both("prefill_attention", query, torch.cat(batch.keys), torch.cat(batch.values),
                            torch.tensor(lens, dtype=torch.int32), HEAD ** -0.5)
    close(actual, expected, dtype)


@pytest.mark.parametrize("op", ["prefill_cache_hit_attention", "chunked_prefill_attention"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("group", GROUPS)
def test_paged_prefill(op, dtype, group):
    seq_lens, query_lens = [130, 256, 300, 40], [2, 128, 45, 40]
    if op == "chunked_prefill_attention":
        query_lens = [1, 128, 1, 40]  # decodes mixed with prefill chunks
    batch = make_paged_batch(seq_lens, BLOCK, KV_HEADS, HEAD, dtype, seed=group, padding=0)
    query = torch.randn(sum(query_lens), KV_HEADS * group, HEAD).to(dtype)
    expected, actual = both(op, query, batch.kv_cache, batch.block_tables,
                            torch.tensor(query_lens, dtype=torch.int32), torch.tensor(seq_lens, dtype=torch.int32),
                            HEAD ** -0.5)
    close(actual, expected, dtype)
