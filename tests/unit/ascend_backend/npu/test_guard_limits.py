"""The guard keeps NPU calls inside the kernels' documented limits, and the ATB masks are built once per step.

Calls go to the recording stand-in of the torch_npu wheel the release pins (op-plugin's declared schemas),
on `meta` tensors; nothing here asserts arithmetic, only which call is made with what.
"""

from __future__ import annotations

import pytest
import torch

import ascend_backend.npu.adapters.attention as attention_mod
import ascend_backend.platform.device as device_mod
from ascend_backend.npu.adapters.attention import MaskCache
from ascend_backend.platform.kernels import OVERRIDE_VAR
from ascend_backend.platform.kinds import NpuStatus, NpuUnavailable
from ascend_backend.registry import REGISTRY, Backend
from tests.unit.ascend_backend.npu.schema import signatures, wheel_commits
from tests.unit.ascend_backend.npu.stand_in import StandIn

AVAILABLE = NpuStatus(NpuUnavailable.AVAILABLE, "stand-in", "")
META = torch.device("meta")


@pytest.fixture
def npu(monkeypatch):
    def install(release: str, torch_npu: str) -> StandIn:
        fake = StandIn(signatures(wheel_commits(torch_npu)[0]))
        module = fake.module
        monkeypatch.setattr(device_mod, "_load_torch_npu", lambda: (module, AVAILABLE))
        monkeypatch.setattr(device_mod, "atb_status", lambda: AVAILABLE)
        monkeypatch.setattr(device_mod, "cann_version", lambda: None)
        monkeypatch.setattr(device_mod, "npu_device_name", lambda: None)
        monkeypatch.setattr(attention_mod, "ATB_MASKS", MaskCache())
        monkeypatch.setenv(OVERRIDE_VAR, f"release={release},chip=A2")
        return fake

    return install


def cache_hit_args(block: int, query_lens=(2, 128), seq_lens=(130, 256)):
    blocks = [-(-n // block) for n in seq_lens]
    cache = torch.empty(2, sum(blocks) + 1, block, 2, 128, dtype=torch.float16, device=META)
    tables = torch.empty(len(seq_lens), max(blocks), dtype=torch.int32, device=META)
    query = torch.empty(sum(query_lens), 8, 128, dtype=torch.float16, device=META)
    lens = torch.tensor(query_lens, dtype=torch.int32), torch.tensor(seq_lens, dtype=torch.int32)
    return query, cache, tables, *lens, 128**-0.5


@pytest.mark.parametrize(
    ("release", "torch_npu", "kernel"),
    [
        ("0.11.0", "2.7.1.post1", "_npu_flash_attention_qlens"),  # the ATB prefix encoder
        ("0.18.0", "2.9.0.post1+git4c901a4", "npu_fused_infer_attention_score"),  # FIA, a query longer than one token
    ],
)
def test_paged_prefill_with_block_32_runs_native_with_the_documented_reason(release, torch_npu, kernel, npu):
    fake = npu(release, torch_npu)
    adapter = REGISTRY.entry("prefill_cache_hit_attention")
    why = adapter.supports[Backend.NPU](*cache_hit_args(32))
    assert why is not None and why.startswith("block size 32") and "@" in why  # the limit, cited
    assert adapter.supports[Backend.NPU](*cache_hit_args(128)) is None
    adapter.impls[Backend.NPU](*cache_hit_args(128))
    assert [c.function for c in fake.calls] == [kernel]


def test_decode_with_block_32_stays_on_fia(npu):
    # FIA's decode branch takes 16-aligned blocks: vllm-ascend's block 128 is not required there.
    npu("0.18.0", "2.9.0.post1+git4c901a4")
    cache = torch.empty(2, 9, 32, 2, 128, dtype=torch.float16, device=META)
    tables = torch.empty(3, 3, dtype=torch.int32, device=META)
    args = torch.empty(3, 8, 128, dtype=torch.float16, device=META), cache, tables, torch.tensor([1, 40, 90]), 0.1
    assert REGISTRY.entry("paged_decode_attention").supports[Backend.NPU](*args) is None


def test_the_atb_prefill_mask_is_built_once_per_step_on_the_device(npu):
    fake = npu("0.11.0", "2.7.1.post1")
    impl = REGISTRY.entry("prefill_attention").impls[Backend.NPU]

    def layer(lens):
        t = sum(lens)
        q = torch.empty(t, 8, 128, dtype=torch.float16, device=META)
        kv = torch.empty(t, 2, 128, dtype=torch.float16, device=META)
        impl(q, kv, kv, torch.tensor(lens, dtype=torch.int32), 0.1)
        return fake.calls[-1].arguments["mask"]

    first, second = layer([5, 300]), layer([5, 300])  # two layers of one step
    assert first is second and first.device == META and list(first.shape) == [300, 300]
    assert layer([7, 9]) is not first  # the next step's lengths build their own


def test_the_splitfuse_mask_is_shared_by_a_step_and_keyed_by_its_lengths(npu):
    fake = npu("0.9.1", "2.5.1.post1")
    impl = REGISTRY.entry("chunked_prefill_attention").impls[Backend.NPU]
    impl(*cache_hit_args(128, (1, 128), (40, 256)))
    impl(*cache_hit_args(128, (1, 128), (40, 256)))
    impl(*cache_hit_args(128, (1, 64), (40, 192)))
    masks = [c.arguments["mask"] for c in fake.calls]
    assert masks[0] is masks[1] and masks[2] is not masks[0]
    assert list(masks[2].shape) == [65, 192]
