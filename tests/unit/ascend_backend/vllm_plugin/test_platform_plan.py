"""What the plugin takes over per platform, and what it leaves to vllm-ascend (no NPU needed)."""

from __future__ import annotations

import pytest

from ascend_backend.vllm_plugin.platform_plan import PlatformKind, detect_platform, plan_registration


def test_cpu_takes_custom_ops_and_attention():
    plan = plan_registration(PlatformKind.CPU, frozenset())
    assert plan.layer_overrides and plan.attention


@pytest.mark.parametrize("names", [{"attention"}, {"vllm_cpu_paged_attention"}, {"*"}])
def test_attention_can_be_switched_off_by_name(names):
    plan = plan_registration(PlatformKind.CPU, frozenset(names))
    assert not plan.attention and "disabled" in plan.note


def test_ascend_npu_defers_everything_to_vllm_ascend():
    plan = plan_registration(PlatformKind.ASCEND_NPU, frozenset())
    assert not plan.layer_overrides and not plan.attention
    assert "vllm-ascend owns" in plan.note


def test_cuda_keeps_vllm_kernels_and_other_oot_platforms_get_forward_oot_overrides():
    assert not plan_registration(PlatformKind.CUDA_ALIKE, frozenset()).layer_overrides
    other = plan_registration(PlatformKind.OTHER_OOT, frozenset())
    assert other.layer_overrides and not other.attention


def test_this_machine_is_detected_as_vllm_cpu():
    pytest.importorskip("vllm")
    assert detect_platform() is PlatformKind.CPU
