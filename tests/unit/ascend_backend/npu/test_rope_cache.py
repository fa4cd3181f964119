"""`_npu_rotary_embedding` gets at most one cos/sin cache per process; every other cache goes to npu_mrope.

op-plugin's RopeAtb.cpp (branches 7.1.0 to 26.1.0 and master) fills its static cos/sin tensors on the
first call and never again, so a second rotary_dim, base, length or dtype would be rotated with the first
cache. The adapter mirrors that state; these tests drive it through the recording stand-in (which kernel
is called with which cache), never through the stand-in's arithmetic.
"""

from __future__ import annotations

import pytest
import torch

import ascend_backend.npu.adapters.rotary as rotary_mod
import ascend_backend.platform.device as device_mod
from ascend_backend.npu.adapters.rotary import AtbRopeCache, rotary_embedding_npu
from ascend_backend.ops.rotary import build_cos_sin_cache
from ascend_backend.platform.kernels import ChipFamily
from ascend_backend.platform.kinds import NpuStatus, NpuUnavailable
from tests.unit.ascend_backend.npu.rules import problems
from tests.unit.ascend_backend.npu.schema import signatures, wheel_commits
from tests.unit.ascend_backend.npu.stand_in import StandIn

AVAILABLE = NpuStatus(NpuUnavailable.AVAILABLE, "stand-in", "")
COMMIT = wheel_commits("2.9.0")[0]  # the op-plugin of v0.18.0rc1's torch_npu


@pytest.fixture
def npu(monkeypatch):
    fake = StandIn(signatures(COMMIT))
    module = fake.module
    monkeypatch.setattr(device_mod, "_load_torch_npu", lambda: (module, AVAILABLE))
    monkeypatch.setattr(device_mod, "atb_status", lambda: AVAILABLE)
    monkeypatch.setattr(device_mod, "cann_version", lambda: None)
    monkeypatch.setattr(device_mod, "npu_device_name", lambda: None)
    monkeypatch.setattr(rotary_mod, "ATB_ROPE_CACHE", AtbRopeCache())
    monkeypatch.setenv("ASCEND_BACKEND_KERNELS", "release=0.18.0,chip=A2")  # rope.atb_v015: _npu_rotary_embedding
    return fake


def call(cache: torch.Tensor, dtype=torch.float16, head: int = 64, tokens: int = 3):
    positions = torch.arange(tokens)
    q, k = torch.zeros(tokens, 2 * head, dtype=dtype), torch.zeros(tokens, head, dtype=dtype)
    return rotary_embedding_npu(positions, q, k, head, cache, True)


def kernels_called(fake: StandIn) -> list[str]:
    return [c.function for c in fake.calls]


def test_the_same_layer_cache_stays_on_the_atb_kernel(npu):
    cache = build_cos_sin_cache(64, 128)
    for _ in range(3):
        call(cache)
    assert kernels_called(npu) == ["_npu_rotary_embedding"] * 3
    handed = {id(c.arguments["cos_sin_cache"]) for c in npu.calls}
    assert len(handed) == 1  # converted once, the same tensor every call


def test_a_second_cache_goes_to_npu_mrope_with_its_own_cache(npu, caplog):
    first, second = build_cos_sin_cache(64, 128, base=10000.0), build_cos_sin_cache(64, 128, base=500000.0)
    call(first)
    with caplog.at_level("WARNING", logger="ascend_backend.npu.adapters.rotary"):
        call(second)
        call(second)
    assert kernels_called(npu) == ["_npu_rotary_embedding", "npu_mrope", "npu_mrope"]
    mrope = npu.calls[1]
    assert mrope.arguments["mrope_section"] == [0, 0, 0] and mrope.arguments["rotary_mode"] == "half"
    assert torch.equal(mrope.arguments["cos_sin_cache"].float(), second.half().float())
    assert problems(mrope, torch.device("cpu"), ChipFamily.A2, COMMIT) == []
    assert sum("already holds another cos/sin cache" in r.message for r in caplog.records) == 1


def test_a_second_dtype_is_a_second_cache(npu):
    # The old NPU test ran float16 before bfloat16 and passed only in that order: the kernel kept fp16 cos/sin.
    cache = build_cos_sin_cache(64, 128)
    call(cache, torch.float16)
    call(cache, torch.bfloat16)
    assert kernels_called(npu) == ["_npu_rotary_embedding", "npu_mrope"]


def test_an_equal_copy_of_the_first_cache_may_use_the_kernel(npu):
    call(build_cos_sin_cache(64, 128))
    call(build_cos_sin_cache(64, 128))  # another tensor, same values: the kernel's statics are right for it
    assert kernels_called(npu) == ["_npu_rotary_embedding", "_npu_rotary_embedding"]


def test_other_rotary_widths_and_gptj_style_reroute(npu):
    call(build_cos_sin_cache(64, 128))
    call(build_cos_sin_cache(32, 128), head=64)  # partial rotary: another cache width
    assert kernels_called(npu) == ["_npu_rotary_embedding", "npu_mrope"]
    positions = torch.arange(3)
    q, k = torch.zeros(3, 128, dtype=torch.float16), torch.zeros(3, 64, dtype=torch.float16)
    rotary_embedding_npu(positions, q, k, 64, build_cos_sin_cache(64, 256), False)
    assert npu.calls[-1].function == "npu_mrope" and npu.calls[-1].arguments["rotary_mode"] == "interleave"


def test_caller_tensors_are_not_handed_to_the_in_place_kernel(npu):
    cache = build_cos_sin_cache(64, 128)
    positions = torch.arange(3)
    q, k = torch.zeros(3, 128, dtype=torch.float16), torch.zeros(3, 64, dtype=torch.float16)
    rotary_embedding_npu(positions, q, k, 64, cache, True)
    written = npu.calls[0].arguments
    assert written["query"].data_ptr() != q.data_ptr() and written["key"].data_ptr() != k.data_ptr()
