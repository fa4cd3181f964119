"""Rotary position embedding (RoPE), neox style (halves) and GPT-J style (interleaved pairs).

`cos_sin_cache` is vLLM's layout: [max_position, rotary_dim] holding [cos | sin], each rotary_dim/2
wide; rotary_dim may be smaller than head_size (partial rotary: the tail of each head passes through).

Worked example, head_size 4, neox, one head x = [a, b, c, d] at position p, cos/sin of p = [c0, c1], [s0, s1]:
    neox pairs (a, c) and (b, d):   [a c0 - c s0, b c1 - d s1, c c0 + a s0, d c1 + b s1]
    gpt-j pairs (a, b) and (c, d):  [a c0 - b s0, b c0 + a s0, c c1 - d s1, d c1 + c s1]

The NPU adapter makes the call the kernel-selection table names for this vllm-ascend release
(`ascend_backend.npu.kernels`, rows cited from vllm_ascend/ops/rotary_embedding.py per tag):

    atb_rope              _npu_rotary_embedding(positions, q2d, k2d, head_size, cache, is_neox), in place on copies
    apply_rotary_pos_emb  npu_apply_rotary_pos_emb(q[1,T,H,D], k, cos[1,T,1,D], sin), neox with 128-wide heads
    mrope_rope            npu_mrope(positions, q2d, k2d, cache, head_size, mrope_section=[0,0,0], rotary_mode=...)

`_npu_rotary_embedding` keeps its cos/sin in process-wide statics filled on the first call and never
replaced (op-plugin op_plugin/ops/atb/RopeAtb.cpp, identical on branches 7.1.0 to 26.1.0 and master:
`if (!cosCache.defined()) InitializeCosSinCache(cos_sin_cache)`). A second cache in the same process
(another rotary_dim, base, length or dtype) would silently be rotated with the first one. So this
module mirrors that state (`AtbRopeCache`): the first cache handed to the kernel is the only one it
ever gets; a call with any other cache goes to `npu_mrope`, which takes the cache per call (vllm-ascend
main uses it for plain RoPE: rope_forward_oot@182b75e), and the route is logged once with the reason.
Callers' tensors are never modified.
"""

from __future__ import annotations

import logging
import weakref
from collections import OrderedDict

import torch

from ascend_backend.npu import kernels
from ascend_backend.npu.device import torch_npu
from ascend_backend.npu.kernels import CallFacts
from ascend_backend.registry import REGISTRY, Backend

logger = logging.getLogger("ascend_backend.ops.rotary")
_KERNEL_DTYPES = (torch.float16, torch.bfloat16)


def build_cos_sin_cache(
    rotary_dim: int, max_position: int, base: float = 10000.0, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """[max_position, rotary_dim] = [cos | sin] of position * base^(-2i/rotary_dim), i < rotary_dim/2."""
    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim))
    angles = torch.outer(torch.arange(max_position, dtype=torch.float64), inv_freq)  # [P, rd/2]
    return torch.cat([angles.cos(), angles.sin()], dim=-1).to(dtype)


@REGISTRY.declare(device="query")
def rotary_embedding(
    positions: torch.Tensor,  # [T] int
    query: torch.Tensor,  # [T, Hq*D] or [T, Hq, D]
    key: torch.Tensor | None,  # [T, Hk*D] or [T, Hk, D], or None
    head_size: int,
    cos_sin_cache: torch.Tensor,  # [max_position, rotary_dim] = [cos | sin]
    is_neox: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:  # rotated (query, key), input shapes and dtypes
    """RoPE, neox (halves) or gpt-j (interleaved pairs); the tail past rotary_dim passes through."""


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, head_size: int, is_neox: bool) -> torch.Tensor:
    # x: [T, H*D] or [T, H, D]; cos/sin: [T, rd/2] float32. The maths is float32 for every dtype.
    # Few, in-place steps on purpose: inside a serving engine this runs once per layer and step, and
    # each extra PyTorch call costs microseconds on small batches.
    shape, dtype = x.shape, x.dtype
    half = cos.shape[-1]
    rotary_dim = 2 * half
    heads = x.reshape(shape[0], -1, head_size)  # [T, H, D]
    if rotary_dim < head_size:  # partial rotary: the tail of each head passes through unchanged
        out = heads.to(torch.float32, copy=True)
    else:
        out = torch.empty(heads.shape, dtype=torch.float32, device=x.device)
    c, s = cos[:, None, :], sin[:, None, :]  # [T, 1, rd/2]
    if is_neox:  # pairs (i, i + rd/2)
        first, second = slice(0, half), slice(half, rotary_dim)
    else:  # pairs (2i, 2i + 1)
        first, second = slice(0, rotary_dim, 2), slice(1, rotary_dim, 2)
    x1, x2 = heads[..., first].float(), heads[..., second].float()
    torch.mul(x1, c, out=out[..., first]).addcmul_(x2, s, value=-1)  # x1 c - x2 s
    torch.mul(x2, c, out=out[..., second]).addcmul_(x1, s)  # x2 c + x1 s
    return out.to(dtype).reshape(shape)


@REGISTRY.register("rotary_embedding", Backend.NATIVE)
def rotary_embedding_native(positions, query, key, head_size, cos_sin_cache, is_neox):
    cos, sin = cos_sin_cache.index_select(0, positions.flatten().long()).float().chunk(2, dim=-1)
    q = _rotate(query, cos, sin, head_size, is_neox)
    k = None if key is None else _rotate(key, cos, sin, head_size, is_neox)
    return q, k


class AtbRopeCache:
    """The cos/sin cache `_npu_rotary_embedding` holds, as far as this process has handed it one.

    Why process state: the kernel's own cache is process state (static tensors in RopeAtb.cpp, filled
    once). `prepared(cache, dtype, device)` converts a caller's cache once per (tensor, dtype, device) so
    the same layer cache keeps its identity across calls, as vLLM's rotary layer keeps its
    `cos_sin_cache`; `admits(prepared)` says whether the kernel's statics hold exactly this cache (the
    first one claimed, or one equal to it). Tests use a fresh instance per case.
    """

    def __init__(self, memo_size: int = 8) -> None:
        self._held: torch.Tensor | None = None
        self._same: dict[int, bool] = {}  # id(prepared) -> equal to the held cache
        self._prepared: OrderedDict[tuple, tuple[weakref.ref, torch.Tensor]] = OrderedDict()
        self._memo_size = memo_size
        self._rerouted = False

    def prepared(self, cache: torch.Tensor, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        key = (id(cache), cache.data_ptr(), cache._version, dtype, str(device))
        hit = self._prepared.get(key)
        if hit is not None and hit[0]() is cache:
            return hit[1]
        converted = cache.to(device=device, dtype=dtype).contiguous()
        self._prepared[key] = (weakref.ref(cache), converted)
        while len(self._prepared) > self._memo_size:
            _key, (_ref, evicted) = self._prepared.popitem(last=False)
            self._same.pop(id(evicted), None)
        return converted

    def admits(self, prepared: torch.Tensor) -> bool:
        """True when the kernel would rotate with exactly `prepared`; claims it on the process's first call."""
        if self._held is None:
            self._held = prepared
            return True
        if prepared is self._held:
            return True
        if id(prepared) not in self._same:
            self._same[id(prepared)] = self._equal(prepared)
        return self._same[id(prepared)]

    def first_reroute(self) -> bool:
        """True once per process: the first call that had to leave the kernel (for a single log line)."""
        first, self._rerouted = not self._rerouted, True
        return first

    def _equal(self, prepared: torch.Tensor) -> bool:
        held = self._held
        if (
            held is None
            or prepared.shape != held.shape
            or prepared.dtype != held.dtype
            or prepared.device != held.device
        ):
            return False
        try:
            return bool(torch.equal(prepared, held))
        except (NotImplementedError, RuntimeError):  # tensors without data (meta) cannot be compared
            return False


ATB_ROPE_CACHE = AtbRopeCache()  # one per process, like the kernel's statics it mirrors


def _call_facts(query: torch.Tensor, head_size: int, cos_sin_cache: torch.Tensor, is_neox: bool) -> CallFacts:
    return CallFacts(head_size=head_size, rotary_dim=int(cos_sin_cache.shape[-1]), neox=bool(is_neox))


def _npu_rotary_unsupported(positions, query, key, head_size, cos_sin_cache, is_neox=True) -> str | None:
    if key is None:
        return "key is None (the NPU kernels rotate query and key together)"
    if query.dtype not in _KERNEL_DTYPES:
        return f"{query.dtype} inputs (vllm-ascend's rotary kernels run in float16/bfloat16)"
    choice = kernels.choose("rotary_embedding", _call_facts(query, head_size, cos_sin_cache, is_neox))
    return choice.reason if choice.native else None


def _atb_rope(positions, query, key, head_size, cache, is_neox) -> tuple[torch.Tensor, torch.Tensor]:
    # rotary_embedding.py@v0.18.0 rope_forward_oot: the kernel rotates 2-D [tokens, heads*dim] in place.
    npu = torch_npu()
    rotary_dim = cache.shape[-1]
    tokens = query.shape[0]
    if rotary_dim < head_size:
        # Partial rotary: rotate the leading rotary_dim of each head, pass the rest through.
        q = query.reshape(tokens, -1, head_size)
        k = key.reshape(tokens, -1, head_size)
        q_rot = q[..., :rotary_dim].contiguous().view(tokens, -1)
        k_rot = k[..., :rotary_dim].contiguous().view(tokens, -1)
        npu._npu_rotary_embedding(positions, q_rot, k_rot, rotary_dim, cache, is_neox)
        q_out = torch.cat([q_rot.view(tokens, -1, rotary_dim), q[..., rotary_dim:]], dim=-1)
        k_out = torch.cat([k_rot.view(tokens, -1, rotary_dim), k[..., rotary_dim:]], dim=-1)
        return q_out.reshape(query.shape), k_out.reshape(key.shape)
    q2d = query.reshape(tokens, -1).clone()  # clone: the kernel writes in place
    k2d = key.reshape(tokens, -1).clone()
    npu._npu_rotary_embedding(positions, q2d, k2d, head_size, cache, is_neox)
    return q2d.view(query.shape), k2d.view(key.shape)


def _apply_rotary_pos_emb(positions, query, key, head_size, cache, is_neox) -> tuple[torch.Tensor, torch.Tensor]:
    # rotary_embedding.py@v0.13.0 _rope_forward_oot: cos/sin per token, each half repeated to the full width,
    # as [1, tokens, 1, head_size] (BSND); the kernel rotates q/k in place and returns them.
    tokens = query.shape[0]
    cos_sin = cache.index_select(0, positions.flatten())  # [T, rd]
    cos, sin = cos_sin.reshape(tokens, 2, -1).repeat(1, 1, 2).chunk(2, dim=-2)  # each [T, 1, rd]
    cos = cos.reshape(1, tokens, 1, -1).contiguous()
    sin = sin.reshape(1, tokens, 1, -1).contiguous()
    q4 = query.reshape(1, tokens, -1, head_size).clone()
    k4 = key.reshape(1, tokens, -1, head_size).clone()
    q_out, k_out = torch_npu().npu_apply_rotary_pos_emb(q4, k4, cos, sin)
    return q_out.reshape(query.shape), k_out.reshape(key.shape)


def _mrope_rope(positions, query, key, head_size, cache, is_neox) -> tuple[torch.Tensor, torch.Tensor]:
    # npu_mrope with mrope_section [0, 0, 0] is plain RoPE with the cache passed per call; it infers
    # rotary_dim from the cache width and returns new tensors. op-plugin accepts rotary_mode 'half' or
    # 'interleave' (RopeWithSinCosCacheKernelNpuOpApi.cpp@master); cache_mode is left at its default
    # because op-plugin 7.0.0 to 7.3.0 do not declare it.
    tokens = query.shape[0]
    q_out, k_out = torch_npu().npu_mrope(
        positions,
        query.contiguous().view(tokens, -1),
        key.contiguous().view(tokens, -1),
        cache,
        head_size,
        mrope_section=[0, 0, 0],
        rotary_mode="half" if is_neox else "interleave",
    )
    return q_out.reshape(query.shape), k_out.reshape(key.shape)


_ROPE_RECIPES = {"atb_rope": _atb_rope, "apply_rotary_pos_emb": _apply_rotary_pos_emb, "mrope_rope": _mrope_rope}
IMPLEMENTED = {"rotary_embedding": frozenset(_ROPE_RECIPES)}


@REGISTRY.register("rotary_embedding", Backend.NPU, supports=_npu_rotary_unsupported)
def rotary_embedding_npu(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    recipe = kernels.choose("rotary_embedding", _call_facts(query, head_size, cos_sin_cache, is_neox)).recipe
    cache = ATB_ROPE_CACHE.prepared(cos_sin_cache, query.dtype, query.device)
    if recipe == "atb_rope" and not ATB_ROPE_CACHE.admits(cache):
        if ATB_ROPE_CACHE.first_reroute():
            logger.warning(
                "rotary_embedding: _npu_rotary_embedding already holds another cos/sin cache in this process "
                "(op-plugin RopeAtb.cpp fills it on the first call only); calls with a different cache (rotary_dim, "
                "base, length or dtype) run npu_mrope, which takes the cache per call"
            )
        recipe = "mrope_rope"
    return _ROPE_RECIPES[recipe](positions, query, key, head_size, cache, is_neox)
