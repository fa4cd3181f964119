"""vLLM's CPU C++ kernels as the registry's `vllm_cpu` backend: maths, contract, switches.

These are real kernels running here (vLLM's CPU build), so they are checked like the native paths:
against the float64 formulas of the native tests. (Attention and the cache write on this backend are
covered with the native ones in tests/unit/ascend_backend/attention/test_vllm_cpu_layout.py.)
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

pytest.importorskip("vllm")

from ascend_backend import ops  # noqa: E402
from ascend_backend.attention import vllm_cpu_layout as layout  # noqa: E402
from ascend_backend.registry import REGISTRY, Backend  # noqa: E402
from ascend_backend.vllm_plugin import vllm_kernels  # noqa: E402
from tests.unit.ascend_backend.ops.test_ops_native import as64, assert_close, rand, rope_reference  # noqa: E402


@pytest.fixture
def installed(monkeypatch):
    monkeypatch.delenv("ASCEND_BACKEND_FORCE_NATIVE", raising=False)
    vllm_kernels.uninstall()
    served = vllm_kernels.install()
    REGISTRY.reset_stats()
    yield served
    vllm_kernels.uninstall()
    REGISTRY.reset_stats()


def test_install_is_idempotent_and_uninstall_restores_native(installed):
    assert set(installed) == {
        "rotary_embedding",
        layout.KV_WRITE_OP,
        layout.PAGED_ATTENTION_OP,
        "rms_norm",
        "add_rms_norm",
    }
    assert vllm_kernels.install() == installed
    for op in installed:
        assert REGISTRY.select(op, "cpu").backend is Backend.VLLM_CPU
    vllm_kernels.uninstall()
    for op in installed:
        sel = REGISTRY.select(op, "cpu")
        assert sel.backend is Backend.NATIVE and "cpu tensors" in sel.reason


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("neox", [True, False])
@pytest.mark.parametrize("head_size,rotary_dim", [(64, 64), (64, 32), (128, 128)])
def test_rotary_on_vllm_kernel_matches_float64(installed, dtype, neox, head_size, rotary_dim):
    tokens, q_heads, k_heads, base = 7, 4, 2, 10000.0
    positions = torch.tensor([0, 1, 5, 17, 100, 511, 2047])
    q = rand(tokens, q_heads * head_size, dtype=dtype, seed=21)
    k = rand(tokens, k_heads, head_size, dtype=dtype, seed=22)  # 3-D: the kernel itself misreads this shape
    q_before, k_before = q.clone(), k.clone()
    cache = ops.build_cos_sin_cache(rotary_dim, 2048, base, dtype=dtype)
    q_out, k_out = ops.rotary_embedding(positions, q, k, head_size, cache, neox)
    assert REGISTRY.stats()["rotary_embedding"] == {"vllm_cpu": 1}
    assert q_out.shape == q.shape and k_out.shape == k.shape
    assert torch.equal(q, q_before) and torch.equal(k, k_before)  # the kernel works in place, on copies
    pos = positions.numpy()
    # The cos/sin table is in the query dtype (vLLM's kernel requires it) while the reference uses exact
    # angles: the dtype's tolerance covers the table's rounding too.
    assert_close(q_out, rope_reference(as64(q), pos, head_size, rotary_dim, base, neox), dtype)
    assert_close(k_out, rope_reference(as64(k), pos, head_size, rotary_dim, base, neox), dtype)


def test_rotary_query_alone_on_vllm_kernel(installed):
    q = rand(3, 2 * 64, dtype=torch.float32, seed=23)
    q_out, k_out = ops.rotary_embedding(torch.tensor([1, 2, 3]), q, None, 64, ops.build_cos_sin_cache(64, 8), True)
    assert k_out is None
    assert_close(q_out, rope_reference(as64(q), [1, 2, 3], 64, 64, 10000.0, True), torch.float32)


def test_rotary_call_the_kernel_cannot_take_runs_native_and_says_why(installed, caplog):
    q = rand(3, 64, dtype=torch.bfloat16, seed=24)
    cache = ops.build_cos_sin_cache(64, 8)  # float32 table with a bfloat16 query
    with caplog.at_level(logging.WARNING, logger="ascend_backend.registry"):
        q_out, _ = ops.rotary_embedding(torch.tensor([1, 2, 3]), q, None, 64, cache, True)
    assert REGISTRY.stats()["rotary_embedding"] == {"native": 1}
    assert "cos/sin cache dtype torch.float32 differs from query dtype torch.bfloat16" in caplog.text
    assert_close(q_out, rope_reference(as64(q), [1, 2, 3], 64, 64, 10000.0, True), torch.bfloat16)


@pytest.mark.parametrize("forced", [layout.KV_WRITE_OP, layout.PAGED_ATTENTION_OP])
def test_forcing_either_linked_op_native_moves_both(installed, monkeypatch, forced):
    monkeypatch.setenv("ASCEND_BACKEND_FORCE_NATIVE", forced)
    REGISTRY.override("*", None)  # recompute the choices under the new environment
    other = layout.PAGED_ATTENTION_OP if forced == layout.KV_WRITE_OP else layout.KV_WRITE_OP
    assert REGISTRY.select(forced, "cpu").backend is Backend.NATIVE
    partner = REGISTRY.select(other, "cpu")
    assert partner.backend is Backend.NATIVE and f"linked to {forced}" in partner.reason
    assert REGISTRY.select("rotary_embedding", "cpu").backend is Backend.VLLM_CPU  # not linked: stays


def rms_reference(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt((x**2).mean(axis=-1, keepdims=True) + eps) * w


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1, 16), (5, 64), (17, 576), (3, 4, 256)])
def test_rms_norms_on_vllm_kernels_match_float64(installed, dtype, shape):
    x, r = rand(*shape, dtype=dtype, seed=31, scale=3), rand(*shape, dtype=dtype, seed=32)
    w = rand(shape[-1], dtype=dtype, seed=33)
    x_before, r_before = x.clone(), r.clone()
    eps = 1e-6
    assert_close(ops.rms_norm(x, w, eps), rms_reference(as64(x), as64(w), eps), dtype)
    out, summed = ops.add_rms_norm(x, r, w, eps)
    total = as64(x) + as64(r)
    assert_close(out, rms_reference(total, as64(w), eps), dtype)
    assert_close(summed, total, dtype)
    assert torch.equal(x, x_before) and torch.equal(r, r_before)  # in-place kernels, run on copies
    assert REGISTRY.stats()["rms_norm"] == {"vllm_cpu": 1} and REGISTRY.stats()["add_rms_norm"] == {"vllm_cpu": 1}


def test_rms_norm_on_a_strided_view_is_read_correctly(installed):
    x = rand(6, 128, dtype=torch.float32, seed=34)[:, :64]  # rows 128 apart: the kernel needs a copy
    w = rand(64, dtype=torch.float32, seed=35)
    assert_close(ops.rms_norm(x, w, 1e-5), rms_reference(as64(x), as64(w), 1e-5), torch.float32)


@pytest.mark.parametrize(
    "hidden,dtype,why",
    [
        (100, torch.float32, "hidden size 100 is not a multiple of 16"),
        (64, torch.float64, "input dtype torch.float64"),
    ],
)
def test_rms_norm_call_the_kernel_cannot_take_runs_native(installed, caplog, hidden, dtype, why):
    x, w = torch.randn(3, hidden, dtype=dtype), torch.randn(hidden, dtype=dtype)
    with caplog.at_level(logging.WARNING, logger="ascend_backend.registry"):
        out = ops.rms_norm(x, w, 1e-6)
    assert REGISTRY.stats()["rms_norm"] == {"native": 1} and why in caplog.text
    np.testing.assert_allclose(as64(out), rms_reference(as64(x), as64(w), 1e-6), atol=1e-6, rtol=1e-6)
