"""Calibration: watch what enters each linear layer while a float model reads sample prompts.

Static W8A8 fixes one activation scale and offset per layer ahead of time, so it needs the range each
layer's input actually takes on real text: `observe_linear_inputs` hooks the named linear modules of a
float model (our executor's `CausalLM` or a transformers model: any module called with the activation
as its first argument), and every forward pass run inside the block widens each layer's observed
[min, max]. Dynamic W8A8 needs no calibration (its scales are computed per token at run time).

    with observe_linear_inputs(model, names) as observers:
        for prompt in prompts:                  # the caller drives the passes (and its progress bar)
            executor.prompt_logits(prompt)
    ranges = {name: obs.result() for name, obs in observers.items()}

Min/max is the observer msmodelslim's default W8A8 calibration uses; it keeps every observed value
representable, at the price of resolution when a layer sees rare outliers (the reason dynamic
per-token scales exist; `tests/unit/ascend_backend/quantization` measures the difference on outlier-heavy inputs).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class ActivationRange:
    """What one layer's input spanned over the calibration set."""

    minimum: float
    maximum: float
    tokens: int  # rows observed (a nan/inf-free count of activations / in_features)


class RangeObserver:
    """Running min/max of every tensor passed to `observe` (one per layer, owned by one calibration)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._minimum = float("inf")
        self._maximum = float("-inf")
        self._tokens = 0

    def observe(self, x: torch.Tensor) -> None:
        """x: [..., in_features]; non-finite values are refused (they would poison the range)."""
        x = x.detach()
        if not torch.isfinite(x).all():
            raise ValueError(f"calibration input of {self.name} holds NaN or Inf: fix the float model first")
        self._minimum = min(self._minimum, float(x.min()))
        self._maximum = max(self._maximum, float(x.max()))
        self._tokens += x.numel() // max(x.shape[-1], 1)

    def result(self) -> ActivationRange:
        if self._tokens == 0:
            raise ValueError(f"layer {self.name} saw no calibration input: is it on the model's forward path?")
        return ActivationRange(self._minimum, self._maximum, self._tokens)


@contextlib.contextmanager
def observe_linear_inputs(model: nn.Module, names: Sequence[str]) -> Iterator[dict[str, RangeObserver]]:
    """Observe the first positional input of each named submodule while the block runs; hooks are removed after."""
    observers = {name: RangeObserver(name) for name in names}
    handles = []
    try:
        for name, observer in observers.items():
            module = model.get_submodule(name)

            def hook(_module: nn.Module, args: tuple, _observer: RangeObserver = observer) -> None:
                _observer.observe(args[0])

            handles.append(module.register_forward_pre_hook(hook))
        yield observers
    finally:
        for handle in handles:
            handle.remove()
