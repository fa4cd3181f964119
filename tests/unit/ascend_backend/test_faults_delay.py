"""The `delay` fault: a planted cost that slows one op and changes no number (docs/METHOD.md §19)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest
import torch
from torch.profiler import profile

from ascend_backend.faults import FaultKind, FaultSpec, delay_operator, parse_fault_specs
from ascend_backend.registry import REGISTRY, FaultHandle


@pytest.fixture
def registry():
    """The process registry: its built-in ops declare themselves on it."""
    REGISTRY.load_builtin_ops()
    return REGISTRY


@contextlib.contextmanager
def armed(registry, spec: FaultSpec) -> Iterator[FaultHandle]:
    handle = registry.arm(spec)
    try:
        yield handle
    finally:
        registry.disarm(handle)


def test_a_delay_spec_parses_with_its_milliseconds():
    (spec,) = parse_fault_specs("silu_and_mul:delay:ms=2.5:call=3")
    assert (spec.op, spec.kind, spec.ms, spec.call) == ("silu_and_mul", FaultKind.DELAY, 2.5, 3)


@pytest.mark.parametrize("text", ["silu_and_mul:delay:ms=0", "silu_and_mul:delay:ms=-1", "rms_norm:delay:ms=20000"])
def test_a_delay_outside_its_range_is_refused_with_the_limit(text):
    with pytest.raises(ValueError, match="must be above 0 and at most"):
        parse_fault_specs(text)


@pytest.mark.parametrize(
    ("op", "make_args"),
    [
        ("silu_and_mul", lambda: (torch.randn(8, 64, dtype=torch.float64),)),
        ("add_rms_norm", lambda: (torch.randn(8, 32), torch.randn(8, 32), torch.rand(32) + 0.5, 1e-6)),
    ],
)
def test_a_delayed_op_returns_exactly_the_undelayed_result(registry, op, make_args):
    args = make_args()
    undelayed = registry.dispatch(op, "cpu", *args)
    with armed(registry, FaultSpec(op, FaultKind.DELAY, ms=5.0)) as handle:
        began = time.perf_counter()
        delayed = registry.dispatch(op, "cpu", *args)
        waited = time.perf_counter() - began
    pairs = zip(delayed, undelayed, strict=True) if isinstance(undelayed, tuple) else [(delayed, undelayed)]
    assert all(torch.equal(d, u) for d, u in pairs)
    assert handle.fired == 1 and waited >= 0.005


def test_the_delayed_silu_and_mul_still_matches_its_float64_formula(registry):
    x = torch.randn(4, 2 * 48, dtype=torch.float64)
    gate, up = x[:, :48], x[:, 48:]
    expected = gate / (1.0 + torch.exp(-gate)) * up  # silu(gate) * up, written out
    with armed(registry, FaultSpec("silu_and_mul", FaultKind.DELAY, ms=1.0)):
        out = registry.dispatch("silu_and_mul", "cpu", x)
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)


def test_the_wait_shows_in_a_profile_as_the_ops_own_planted_operator(registry):
    x = torch.randn(4, 64)
    with armed(registry, FaultSpec("silu_and_mul", FaultKind.DELAY, ms=3.0, call=2)) as handle, profile() as captured:
        for _ in range(3):
            registry.dispatch("silu_and_mul", "cpu", x)
    events = [e for e in captured.events() if e.name == "planted::silu_and_mul"]
    assert len(events) == 1 and handle.fired == 1  # call=2: only the second call waits
    assert events[0].cpu_time_total >= 3000  # microseconds


def test_the_planted_operator_is_defined_once_per_op():
    assert delay_operator("rms_norm") is delay_operator("rms_norm")
    assert torch.ops.planted.rms_norm.default.name() == "planted::rms_norm"
