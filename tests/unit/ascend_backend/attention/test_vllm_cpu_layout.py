"""Paged attention on vLLM's CPU cache layout (`vllm_cpu_layout`) against the float64 reference.

The attention tests run on every implementation of the two linked ops: the native path (eager and
Inductor-fused decode) and vLLM's own C++ kernels (the `vllm_cpu` backend the plugin registers in an
engine), each writing its cache through its own `kv_write` and read back by its own attention.
"""

from __future__ import annotations

import pytest
import torch

from ascend_backend.attention import vllm_cpu_layout as layout
from ascend_backend.registry import REGISTRY
from tests.unit.ascend_backend.attention.reference import dense_attention_f64

BLOCK = 32


@pytest.fixture(params=["native-eager", "native-fused", "vllm_cpu"])
def kernel(request, monkeypatch):
    """Which implementation serves kv_write + paged attention in this test."""
    if request.param == "vllm_cpu":
        pytest.importorskip("vllm")
        from ascend_backend.vllm_plugin import vllm_kernels

        vllm_kernels.install()
        assert REGISTRY.select(layout.PAGED_ATTENTION_OP, "cpu").backend.value == "vllm_cpu"
        yield request.param
        vllm_kernels.uninstall()
        return
    monkeypatch.setenv("ASCEND_BACKEND_FUSED_DECODE", "off" if request.param == "native-eager" else "on")
    yield request.param
    if request.param == "native-fused":
        from ascend_backend.attention import fused_decode

        assert fused_decode.failure() is None, f"the fused kernel did not compile: {fused_decode.failure()}"


def step_of(starts, seq_lens, table) -> layout.PagedStep:
    """The step's inputs as vLLM's builder hands them over (int32 tensors)."""
    return layout.PagedStep(torch.as_tensor(starts).int(), torch.as_tensor(seq_lens).int(), table.int(), BLOCK)


def fill_cache(
    contexts,
    kv_heads: int,
    head_size: int,
    num_blocks: int,
    seed: int = 0,
    dtype=torch.float32,
    unwritten: float = float("nan"),
):
    """Write each request's K/V through `kv_write` into scattered blocks; returns cache, block table.

    Slots no request wrote hold `unwritten`: NaN by default, so a kernel that reads past a context shows it.
    """
    gen = torch.Generator().manual_seed(seed)
    cache = torch.full((num_blocks, kv_heads, BLOCK, 2 * head_size), unwritten, dtype=dtype)
    free = torch.randperm(num_blocks, generator=gen).tolist()
    width = max(-(-k.shape[0] // BLOCK) for k, _ in contexts)
    table = torch.zeros(len(contexts), width, dtype=torch.int32)
    for r, (k, v) in enumerate(contexts):
        blocks = [free.pop() for _ in range(-(-k.shape[0] // BLOCK))]
        table[r, : len(blocks)] = torch.tensor(blocks)
        slots = torch.tensor([blocks[t // BLOCK] * BLOCK + t % BLOCK for t in range(k.shape[0])])
        layout.kv_write(k, v, cache, slots)
    return cache, table


def test_kv_write_puts_token_at_block_and_offset_of_its_slot_and_skips_padding():
    cache = torch.zeros(4, 2, BLOCK, 2 * 8)
    key = torch.arange(3 * 2 * 8, dtype=torch.float32).reshape(3, 2, 8) + 1
    value = -key
    # slot 72 = block 2, offset 8 (the module docstring's worked example); slot -1 is padding.
    layout.kv_write(key, value, cache, torch.tensor([72, -1, 5]))
    split = cache.view(4, 2, 2, BLOCK, 8)
    assert torch.equal(split[2, :, 0, 8], key[0]) and torch.equal(split[2, :, 1, 8], value[0])
    assert torch.equal(split[0, :, 0, 5], key[2]) and torch.equal(split[0, :, 1, 5], value[2])
    assert int((cache != 0).sum()) == 2 * 2 * 2 * 8  # two tokens x (k, v) x 2 heads x 8 dims, nothing else


def test_kv_write_matches_vllm_split_of_the_same_tensor():
    cache = torch.zeros(3, 2, BLOCK, 2 * 4)
    key, value = torch.randn(1, 2, 4), torch.randn(1, 2, 4)
    layout.kv_write(key, value, cache, torch.tensor([BLOCK + 3]))
    key_cache, value_cache = cache.view(3, 2, 2 * BLOCK, 4).chunk(2, dim=2)  # what vLLM's CPU backend reads
    assert torch.equal(key_cache[1, :, 3], key[0]) and torch.equal(value_cache[1, :, 3], value[0])


@pytest.mark.parametrize("q_heads,kv_heads", [(4, 4), (6, 2)])
def test_mixed_batch_of_decodes_prefill_and_chunked_prefill_matches_float64(q_heads, kv_heads, kernel):
    torch.manual_seed(1)
    head_size = 32  # a head size vLLM's CPU kernel supports (16 is not)
    # decodes at 1, 45 and 64; prompts of 40 and 7 with nothing cached; a chunk of 5 ending at 37
    ctx_lens = [1, 45, 40, 37, 64, 7]
    q_lens = [1, 1, 40, 5, 1, 7]
    contexts = [(torch.randn(n, kv_heads, head_size), torch.randn(n, kv_heads, head_size)) for n in ctx_lens]
    # vLLM's kernel computes whole blocks and masks the tail (0 x NaN = NaN), so it needs the zeroed
    # cache vLLM allocates; the native path must not read unwritten slots at all.
    unwritten = 0.0 if kernel == "vllm_cpu" else float("nan")
    cache, table = fill_cache(contexts, kv_heads, head_size, num_blocks=24, unwritten=unwritten)
    query = torch.randn(sum(q_lens), q_heads, head_size)
    starts = torch.tensor([0] + list(torch.tensor(q_lens).cumsum(0)))
    step = step_of(starts, ctx_lens, table)
    plan = step.plan
    assert plan.query_lens == q_lens and plan.seq_lens == ctx_lens
    assert plan.decode_index.num_seqs == 3  # the decodes at 1, 45 and 64, for the fused kernel
    scale = head_size**-0.5
    out = layout.paged_attention(query, cache, step, scale)
    assert not out.isnan().any()  # no unwritten (NaN) slot leaked into any result
    for r, ((k, v), q_len) in enumerate(zip(contexts, q_lens, strict=True)):
        got = out[starts[r] : starts[r] + q_len]
        want = dense_attention_f64(query[starts[r] : starts[r] + q_len], k, v, scale)
        torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5)


def test_bfloat16_cache_stays_close_to_float64(kernel):
    torch.manual_seed(2)
    contexts = [(torch.randn(40, 2, 32).bfloat16(), torch.randn(40, 2, 32).bfloat16())]
    cache, table = fill_cache(contexts, 2, 32, num_blocks=4, dtype=torch.bfloat16, unwritten=0.0)
    query = torch.randn(1, 4, 32)
    out = layout.paged_attention(query.bfloat16(), cache, step_of([0, 1], [40], table), 32**-0.5)
    assert out.dtype == torch.bfloat16
    want = dense_attention_f64(query.bfloat16(), *contexts[0], 32**-0.5)
    torch.testing.assert_close(out.double(), want, atol=3e-2, rtol=3e-2)


def test_calls_are_counted_and_a_fault_on_attention_reaches_the_output(kernel):
    REGISTRY.reset_stats()
    contexts = [(torch.randn(3, 1, 32), torch.randn(3, 1, 32))]
    cache, table = fill_cache(contexts, 1, 32, num_blocks=2, unwritten=0.0)
    step = step_of([0, 1], [3], table)
    out = torch.zeros(1, 1, 32)
    with REGISTRY.inject(layout.PAGED_ATTENTION_OP, "nan", call=2) as fault:
        first = layout.paged_attention(torch.randn(1, 1, 32), cache, step, 0.3, out)
        second = layout.paged_attention(torch.randn(1, 1, 32), cache, step, 0.3, out)
    assert first is out and second is not out  # results land in `out`; a fault returns a corrupted copy
    assert not out.isnan().any() and second.isnan().all() and fault.fired == 1
    backend = "vllm_cpu" if kernel == "vllm_cpu" else "native"
    stats = REGISTRY.stats()
    assert stats[layout.PAGED_ATTENTION_OP] == {backend: 2, "faulted": 1}
    assert stats[layout.KV_WRITE_OP] == {backend: 1}
    REGISTRY.reset_stats()


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-6), (torch.bfloat16, 8e-3)])
def test_native_attention_agrees_with_vllm_cpu_kernel_on_the_same_tokens(dtype, tol, decode_path):
    """vLLM's C++ kernel reads its own (ISA-packed) cache; ours reads ours; same K/V, same answer."""
    pytest.importorskip("vllm")
    from vllm import _custom_ops as vllm_ops
    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

    torch.manual_seed(3)
    num_blocks, kv_heads, head_size, q_heads, lens = 8, 3, 64, 9, [50, 20, 33]
    table = torch.tensor([[0, 3], [5, 0], [6, 7]], dtype=torch.int32)
    ours = torch.zeros(num_blocks, kv_heads, BLOCK, 2 * head_size, dtype=dtype)
    theirs = torch.zeros_like(ours)
    isa = _get_attn_isa(dtype, BLOCK, head_size)
    key_cache, value_cache = theirs.view(num_blocks, kv_heads, 2 * BLOCK, head_size).chunk(2, dim=2)
    for r, n in enumerate(lens):
        k, v = torch.randn(n, kv_heads, head_size, dtype=dtype), torch.randn(n, kv_heads, head_size, dtype=dtype)
        slots = torch.tensor([int(table[r, t // BLOCK]) * BLOCK + t % BLOCK for t in range(n)])
        layout.kv_write(k, v, ours, slots)
        vllm_ops.cpu_attn_reshape_and_cache(k, v, key_cache, value_cache, slots, isa)
    q_lens = [1, 1, 4]  # two decodes and a 4-token chunk at the end of a 33-token context
    query = torch.randn(sum(q_lens), q_heads, head_size, dtype=dtype)
    starts = torch.tensor([0, 1, 2, 6], dtype=torch.int32)
    seq_lens = torch.tensor(lens, dtype=torch.int32)
    metadata = vllm_ops.cpu_attn_get_scheduler_metadata(
        num_reqs=3,
        num_heads=q_heads,
        num_kv_heads=kv_heads,
        head_dim=head_size,
        seq_lens=seq_lens,
        dtype=dtype,
        query_start_loc=starts,
        causal=True,
        sliding_window_size=-1,
        isa=isa,
        enable_kv_split=False,
    )
    want = torch.empty_like(query)
    vllm_ops.cpu_attention_with_kv_cache(
        query=query,
        key_cache=key_cache,
        value_cache=value_cache,
        output=want,
        query_start_loc=starts,
        seq_lens=seq_lens,
        scale=head_size**-0.5,
        causal=True,
        alibi_slopes=None,
        sliding_window=-1,
        block_table=table,
        softcap=0,
        scheduler_metadata=metadata,
        s_aux=None,
    )
    got = layout.paged_attention(query, ours, step_of(starts, seq_lens, table), head_size**-0.5)
    torch.testing.assert_close(got.float(), want.float(), atol=tol, rtol=tol)
