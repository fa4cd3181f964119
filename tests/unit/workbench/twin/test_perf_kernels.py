"""The kernel bucket opened up (`twin.perf.kernels`): new, gone, slower, more calls; per vLLM module."""

from __future__ import annotations

import pytest

from workbench.profiling.profile import CPU_MAPPING, OpStat, Profile, ProfileFormat, StepShare
from workbench.twin.perf.kernels import compare_kernels, compare_modules, kernel_uses, notable
from workbench.twin.perf.policy import load_perf_thresholds

POLICY = load_perf_thresholds()


def profile(ops: dict[str, tuple[int, float]], steps: int = 10) -> Profile:
    """One rank, `steps` steps; ops: name -> (calls, self µs) over the window."""
    shares = tuple(StepShare("0", i, 0.0, 1000.0, 0.0, 0.0, 500.0) for i in range(steps))
    stats = tuple(OpStat("0", name, "op", calls, us) for name, (calls, us) in ops.items())
    return Profile("x", ProfileFormat.TORCH_TRACE, "cpu", CPU_MAPPING, shares, stats)


BASE = {"_C::onednn_mm": (280, 28000.0), "aten::silu": (40, 800.0), "aten::copy_": (100, 1000.0)}


def jitter(ops, factor):
    return {name: (calls, us * factor) for name, (calls, us) in ops.items()}


def test_per_step_uses_divide_by_the_rank_steps_profiled():
    uses = kernel_uses(profile(BASE))
    assert uses["_C::onednn_mm"].calls == 28 and uses["_C::onednn_mm"].us == 2800.0


def test_a_planted_delay_is_a_new_kernel_of_its_op_and_module():
    a = [profile(jitter(BASE, f)) for f in (1.0, 1.02, 0.98)]
    delayed = {**BASE, "planted::silu_and_mul": (40, 80000.0)}  # 4 calls a step, 2 ms each
    b = [profile(jitter(delayed, f)) for f in (1.0, 1.01, 0.99)]
    changes = compare_kernels(a, b, POLICY)
    top = changes[0]
    assert (top.name, top.status, top.op, top.module) == ("planted::silu_and_mul", "new", "silu_and_mul", "mlp.act_fn")
    assert top.b_calls == 4 and top.b_us_per_call == pytest.approx(2000.0) and top.delta_us == pytest.approx(8000.0)
    assert [c.name for c in notable(changes, 8000.0, POLICY)] == ["planted::silu_and_mul"]
    modules = compare_modules(changes, a, b)
    assert modules[0].module == "mlp.act_fn" and modules[0].delta_us == pytest.approx(8000.0)


def test_a_slower_kernel_and_one_called_more_are_told_apart():
    a = [profile(jitter(BASE, f)) for f in (1.0, 1.01, 0.99)]
    slower = {**BASE, "_C::onednn_mm": (280, 42000.0), "aten::copy_": (200, 2000.0)}
    b = [profile(jitter(slower, f)) for f in (1.0, 1.01, 0.99)]
    status = {c.name: c.status for c in compare_kernels(a, b, POLICY)}
    assert status == {"_C::onednn_mm": "slower", "aten::copy_": "more calls", "aten::silu": "unchanged"}


def test_a_kernel_only_a_has_is_gone():
    a = [profile({**BASE, "aten::gelu": (10, 100.0)}) for _ in range(2)]
    b = [profile(BASE) for _ in range(2)]
    gone = next(c for c in compare_kernels(a, b, POLICY) if c.name == "aten::gelu")
    assert gone.status == "gone" and gone.b_us_per_call is None
