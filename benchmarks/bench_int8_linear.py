"""Int8 linear (W8A8) against bf16 and fp32 linear at SmolLM2's shapes: vLLM's CPU int8 kernel and ours.

    .venv/bin/python benchmarks/bench_int8_linear.py                  # 1, 32, 512 tokens; every shape
    .venv/bin/python benchmarks/bench_int8_linear.py --tokens 512 --rounds 20
    .venv/bin/python benchmarks/bench_int8_linear.py --without vllm_static   # see below

Shapes are SmolLM2-135M's projections as vLLM runs them (fused): qkv 576->960, o 576->576,
gate_up 576->3072, down 1536->576. Candidates, all on the same weights and activations:

- fp32, bf16: `torch.nn.functional.linear` on the float weights (the bf16 one is the baseline);
- vllm_static, vllm_dynamic: vLLM 0.32's CPU int8 kernel exactly as its compressed-tensors W8A8 scheme
  builds it (`init_int8_linear_kernel` -> `CPUInt8ScaledMMLinearKernel.process_weights_after_loading`
  -> `apply_weights`; oneDNN, or the AMX kernel where the CPU has AMX), static per-tensor asymmetric
  and dynamic per-token activations, bf16 in and out;
- native_static, native_dynamic: `ascend_backend.quantization`'s native integer path (the registry ops
  `w8a8_linear`, `w8a8_dynamic_linear`: exact int8 x int8 -> int32 via float32 GEMMs, then dequantize).

vLLM's static asymmetric path is orders of magnitude slower than bf16 on this machine (measured: 21 ms
against 0.12 ms at 1 token, 2.2 s against 7.4 ms at 32 tokens for gate_up), so at 512 tokens it alone
takes many minutes; `--without vllm_static` leaves it out. The served W8A8 recipe uses the dynamic scheme.

Every int8 candidate is first checked against the float64 product of its own dequantized operands.
Timing interleaves the candidates round by round; the minimum per candidate is reported (the machine
may be shared), with ratios against bf16 measured in the same run. Target: vllm int8 >= 1.5x bf16 at
512 tokens (a whole layer's four projections together).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ascend_backend.quantization import ActivationRange, QuantType, quantize_linear
from ascend_backend.quantization.ops import w8a8_dynamic_linear, w8a8_linear

SHAPES = {"qkv": (576, 960), "o": (576, 576), "gate_up": (576, 3072), "down": (1536, 576)}
TARGET = 1.5
TOLERANCE = 3e-2  # relative Frobenius error of a bf16 output against its own float64 maths


@dataclass(frozen=True)
class Case:
    name: str
    tokens: int
    x: torch.Tensor  # [tokens, K] bf16
    weight: torch.Tensor  # [N, K] float32


def make_case(name: str, tokens: int, seed: int) -> Case:
    k, n = SHAPES[name]
    g = torch.Generator().manual_seed(seed)
    return Case(name, tokens, torch.randn(tokens, k, generator=g).bfloat16(), torch.randn(n, k, generator=g) / k**0.5)


def float_candidates(case: Case) -> dict[str, Callable[[], torch.Tensor]]:
    w32, w16 = case.weight, case.weight.bfloat16()
    x32 = case.x.float()
    return {"fp32": lambda: F.linear(x32, w32), "bf16": lambda: F.linear(case.x, w16)}


INT8_CANDIDATES = ("native_static", "native_dynamic", "vllm_static", "vllm_dynamic")


def native_candidates(case: Case) -> dict[str, tuple[Callable[[], torch.Tensor], torch.Tensor]]:
    """name -> (call, float64 reference of the same quantized maths)."""
    x = case.x
    static = quantize_linear(
        case.weight, None, QuantType.W8A8, torch.bfloat16, ActivationRange(float(x.min()), float(x.max()), x.shape[0])
    )
    dynamic = quantize_linear(case.weight, None, QuantType.W8A8_DYNAMIC, torch.bfloat16)
    w_s, w_d = static.weight.t().contiguous(), dynamic.weight.t().contiguous()
    scale, offset = static.input_scale.reshape(1).bfloat16(), torch.tensor([static.input_offset], dtype=torch.int8)
    deq, qbias = static.static_deq_scale(), static.static_quant_bias()
    return {
        "native_static": (lambda: w8a8_linear(x, w_s, scale, offset, deq, qbias), reference(x, static)),
        "native_dynamic": (lambda: w8a8_dynamic_linear(x, w_d, dynamic.weight_scale.bfloat16()), reference(x, dynamic)),
    }


def reference(x: torch.Tensor, layer) -> torch.Tensor:
    """float64 y of a quantized layer: activations quantized as the scheme says, times the dequantized weight."""
    x64 = x.double()
    w = layer.weight.double() * layer.weight_scale.double()[:, None]
    if layer.quant_type is QuantType.W8A8:
        s, z = float(layer.input_scale), layer.input_offset
        return (torch.round(x64 / s + z).clamp(-128, 127) - z) * s @ w.t()
    s_t = x64.abs().amax(1, keepdim=True) / 127
    return torch.round(x64 / s_t).clamp(-127, 127) * s_t @ w.t()


def vllm_candidates(case: Case) -> dict[str, tuple[Callable[[], torch.Tensor], torch.Tensor]]:
    """vLLM's CPU int8 kernel for the static and dynamic schemes (empty when vLLM is not installed)."""
    try:
        from vllm.model_executor.kernels.linear import init_int8_linear_kernel
    except ImportError as exc:
        print(f"vLLM's int8 kernel unavailable ({exc}); timing ours only")
        return {}
    out = {}
    x = case.x
    for name, kind in (("vllm_static", QuantType.W8A8), ("vllm_dynamic", QuantType.W8A8_DYNAMIC)):
        activation = ActivationRange(float(x.min()), float(x.max()), x.shape[0])
        layer_q = quantize_linear(case.weight, None, kind, torch.bfloat16, activation)
        static = kind is QuantType.W8A8
        kernel = init_int8_linear_kernel(
            is_channelwise=True,
            is_static_input_scheme=static,
            input_symmetric=not static,
            module_name="bench_int8_linear",
        )
        layer = torch.nn.Module()
        layer.logical_widths = [layer_q.out_features]
        layer.bias = None
        layer.register_parameter("weight", torch.nn.Parameter(layer_q.weight.clone(), requires_grad=False))
        layer.register_parameter(
            "weight_scale", torch.nn.Parameter(layer_q.weight_scale[:, None].clone(), requires_grad=False)
        )
        layer.register_parameter(
            "input_scale",
            torch.nn.Parameter(layer_q.input_scale.reshape(1).clone(), requires_grad=False) if static else None,
        )
        zp = torch.tensor([layer_q.input_offset], dtype=torch.int8) if static else None
        layer.register_parameter("input_zero_point", torch.nn.Parameter(zp, requires_grad=False) if static else None)
        layer.register_parameter("azp_adj", None)
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.bfloat16)  # vLLM builds kernels under the model's dtype
        try:
            kernel.process_weights_after_loading(layer)
        finally:
            torch.set_default_dtype(previous)
        out[name] = ((lambda k=kernel, m=layer: k.apply_weights(m, x, None)), reference(x, layer_q))
    return out


def relative_error(y: torch.Tensor, expected: torch.Tensor) -> float:
    return float((y.double() - expected).norm() / expected.norm())


def time_all(calls: dict[str, Callable[[], torch.Tensor]], rounds: int) -> dict[str, float]:
    """Minimum seconds per call of each candidate over `rounds` interleaved rounds."""
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for call in calls.values():
        call()  # warm-up: oneDNN primitives, allocator
    for _ in range(rounds):
        for name, call in calls.items():
            started = time.perf_counter()
            call()
            samples[name].append(time.perf_counter() - started)
    return {name: min(times) for name, times in samples.items()}


def bench(tokens: int, rounds: int, without: frozenset[str] = frozenset()) -> dict[str, float]:
    """Seconds per candidate summed over the four projections at `tokens` tokens; prints per-shape rows."""
    totals: dict[str, float] = {}
    for i, name in enumerate(SHAPES):
        case = make_case(name, tokens, seed=i)
        checked = {k: v for k, v in {**native_candidates(case), **vllm_candidates(case)}.items() if k not in without}
        for cand, (call, expected) in checked.items():
            err = relative_error(call(), expected)
            if err > TOLERANCE:
                raise SystemExit(f"{cand} at {name} x {tokens}: relative error {err:.3g} > {TOLERANCE} - not timed")
        calls = {**float_candidates(case), **{k: v[0] for k, v in checked.items()}}
        times = time_all(calls, rounds)
        base = times["bf16"]
        row = "  ".join(f"{k} {v * 1e3:8.3f} ms ({base / v:4.2f}x)" for k, v in times.items())
        print(f"{name:8s} {tokens:4d} tok  {row}", flush=True)
        for k, v in times.items():
            totals[k] = totals.get(k, 0.0) + v
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[1, 32, 512])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--without", nargs="+", default=[], choices=INT8_CANDIDATES, help="int8 candidates to leave out"
    )
    args = parser.parse_args()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU capability "
        f"{torch.backends.cpu.get_cpu_capability()}; speed-up = bf16 time / candidate time"
    )
    summary = {}
    for tokens in args.tokens:
        totals = bench(tokens, args.rounds, frozenset(args.without))
        summary[tokens] = {k: totals["bf16"] / v for k, v in totals.items()}
    print("\nspeed-up vs bf16, one layer's four projections together:")
    for tokens, ratios in summary.items():
        print(f"  {tokens:4d} tokens: " + "  ".join(f"{k} {r:.2f}x" for k, r in ratios.items()))
    at_512 = summary.get(512, {})
    for name in ("vllm_static", "vllm_dynamic"):
        if name in at_512:
            verdict = "meets" if at_512[name] >= TARGET else "misses"
            print(f"{name} at 512 tokens: {at_512[name]:.2f}x bf16 - {verdict} the {TARGET}x target")
    medians = [statistics.median(r.values()) for r in summary.values()]
    print(f"(median ratio across candidates per token count: {', '.join(f'{m:.2f}' for m in medians)})")


if __name__ == "__main__":
    main()
