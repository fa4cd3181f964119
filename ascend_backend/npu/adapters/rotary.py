"""RoPE and M-RoPE on the NPU: the call the kernel-selection table names for the vllm-ascend release
(rows cited from vllm_ascend/ops/rotary_embedding.py per tag). The native references are
`ascend_backend.ops.rotary` and `ascend_backend.ops.multimodal_rotary`.

    rotary_embedding
      atb_rope              _npu_rotary_embedding(positions, q2d, k2d, head_size, cache, is_neox), in place on copies
      apply_rotary_pos_emb  npu_apply_rotary_pos_emb(q[1,T,H,D], k, cos[1,T,1,D], sin), neox with 128-wide heads
      mrope_rope            npu_mrope(positions, q2d, k2d, cache, head_size, mrope_section=[0,0,0], rotary_mode=...)
    mrope
      npu_mrope             npu_mrope(positions, q2d, k2d, cache, head_size, mrope_section=..., rotary_mode='half'),
                            as AscendMRotaryEmbedding makes it (ops/rotary_embedding.py@v0.18.0, only for
                            mrope_section [16, 24, 24]; 1-D positions pass [0, 0, 0])

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

from ascend_backend.npu.guard import dtype_name, npu_op
from ascend_backend.ops import multimodal_rotary as _declared_mrope  # noqa: F401  (declares mrope)
from ascend_backend.ops import rotary as _declared_rope  # noqa: F401  (declares rotary_embedding)
from ascend_backend.platform.kernels import CallFacts
from ascend_backend.platform.limits import CallShape

logger = logging.getLogger("ascend_backend.npu.adapters.rotary")


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


# --------------------------------------------------------------------------------------------- guards
def _rope_refuses(positions, query, key, head_size, cos_sin_cache, is_neox) -> str | None:
    return "key is None (the NPU kernels rotate query and key together)" if key is None else None


def _rope_facts(positions, query, key, head_size, cos_sin_cache, is_neox) -> CallFacts:
    return CallFacts(head_size=head_size, rotary_dim=int(cos_sin_cache.shape[-1]), neox=bool(is_neox))


def _rope_shape(positions, query, key, head_size, cos_sin_cache, is_neox) -> CallShape:
    return CallShape(dtype=dtype_name(query), head_size=int(head_size), rotary_dim=int(cos_sin_cache.shape[-1]))


def _mrope_shape(positions, query, key, head_size, cos_sin_cache, mrope_section, is_neox) -> CallShape:
    return CallShape(dtype=dtype_name(query), head_size=int(head_size), rotary_dim=int(cos_sin_cache.shape[-1]))


def _mrope_refuses(positions, query, key, head_size, cos_sin_cache, mrope_section, is_neox) -> str | None:
    if key is None:
        return "key is None (npu_mrope rotates query and key together)"
    if not is_neox:
        return "GPT-J style M-RoPE (vllm-ascend calls npu_mrope with rotary_mode='half' only)"
    return None


def _mrope_facts(positions, query, key, head_size, cos_sin_cache, mrope_section, is_neox) -> CallFacts:
    return CallFacts(
        head_size=head_size, rotary_dim=int(cos_sin_cache.shape[-1]), neox=True, mrope_section=tuple(mrope_section)
    )


# --------------------------------------------------------------------------------------------- RoPE recipes
def _atb_rope(npu, positions, query, key, head_size, cos_sin_cache, is_neox):
    # rotary_embedding.py@v0.18.0 rope_forward_oot: the kernel rotates 2-D [tokens, heads*dim] in place.
    cache = ATB_ROPE_CACHE.prepared(cos_sin_cache, query.dtype, query.device)
    if not ATB_ROPE_CACHE.admits(cache):
        if ATB_ROPE_CACHE.first_reroute():
            logger.warning(
                "rotary_embedding: _npu_rotary_embedding already holds another cos/sin cache in this process "
                "(op-plugin RopeAtb.cpp fills it on the first call only); calls with a different cache (rotary_dim, "
                "base, length or dtype) run npu_mrope, which takes the cache per call"
            )
        return _mrope_rope(npu, positions, query, key, head_size, cos_sin_cache, is_neox)
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


def _apply_rotary_pos_emb(npu, positions, query, key, head_size, cos_sin_cache, is_neox):
    # rotary_embedding.py@v0.13.0 _rope_forward_oot: cos/sin per token, each half repeated to the full width,
    # as [1, tokens, 1, head_size] (BSND); the kernel rotates q/k in place and returns them.
    cache = ATB_ROPE_CACHE.prepared(cos_sin_cache, query.dtype, query.device)
    tokens = query.shape[0]
    cos_sin = cache.index_select(0, positions.flatten())  # [T, rd]
    cos, sin = cos_sin.reshape(tokens, 2, -1).repeat(1, 1, 2).chunk(2, dim=-2)  # each [T, 1, rd]
    cos = cos.reshape(1, tokens, 1, -1).contiguous()
    sin = sin.reshape(1, tokens, 1, -1).contiguous()
    q4 = query.reshape(1, tokens, -1, head_size).clone()
    k4 = key.reshape(1, tokens, -1, head_size).clone()
    q_out, k_out = npu.npu_apply_rotary_pos_emb(q4, k4, cos, sin)
    return q_out.reshape(query.shape), k_out.reshape(key.shape)


def _mrope_rope(npu, positions, query, key, head_size, cos_sin_cache, is_neox):
    # npu_mrope with mrope_section [0, 0, 0] is plain RoPE with the cache passed per call; it infers
    # rotary_dim from the cache width and returns new tensors. op-plugin accepts rotary_mode 'half' or
    # 'interleave' (RopeWithSinCosCacheKernelNpuOpApi.cpp@master); cache_mode is left at its default
    # because op-plugin 7.0.0 to 7.3.0 do not declare it.
    cache = ATB_ROPE_CACHE.prepared(cos_sin_cache, query.dtype, query.device)
    tokens = query.shape[0]
    q_out, k_out = npu.npu_mrope(
        positions,
        query.contiguous().view(tokens, -1),
        key.contiguous().view(tokens, -1),
        cache,
        head_size,
        mrope_section=[0, 0, 0],
        rotary_mode="half" if is_neox else "interleave",
    )
    return q_out.reshape(query.shape), k_out.reshape(key.shape)


# --------------------------------------------------------------------------------------------- M-RoPE recipe
def _npu_mrope(npu, positions, query, key, head_size, cos_sin_cache, mrope_section, is_neox):
    cache = cos_sin_cache.to(device=query.device, dtype=query.dtype).contiguous()
    section = [0, 0, 0] if positions.dim() == 1 else list(mrope_section)
    q_out, k_out = npu.npu_mrope(
        positions.contiguous(),
        query.contiguous(),
        key.contiguous(),
        cache,
        head_size,
        mrope_section=section,
        rotary_mode="half",
    )
    return q_out.reshape(query.shape), k_out.reshape(key.shape)


rotary_embedding_npu = npu_op(
    "rotary_embedding",
    {"atb_rope": _atb_rope, "apply_rotary_pos_emb": _apply_rotary_pos_emb, "mrope_rope": _mrope_rope},
    facts=_rope_facts,
    refuse=_rope_refuses,
    shape=_rope_shape,
)
mrope_npu = npu_op("mrope", {"npu_mrope": _npu_mrope}, facts=_mrope_facts, refuse=_mrope_refuses, shape=_mrope_shape)
