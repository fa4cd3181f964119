"""The planted host cost of the vLLM plugin (`vllm_plugin.planted`): a sleep before every forward step."""

from __future__ import annotations

import time

import pytest
import torch
from torch import nn

from ascend_backend.vllm_plugin.planted import PlantedCost, PlantedKind, parse_planted, sleep_before_each_step


def test_a_step_sleep_parses():
    assert parse_planted("step_sleep:ms=5") == (PlantedCost(PlantedKind.STEP_SLEEP, 5.0),)
    assert parse_planted("") == ()


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("nap:ms=5", "unknown cost 'nap'"),
        ("step_sleep:seconds=5", "write step_sleep:ms=MILLISECONDS"),
        ("step_sleep:ms=five", "is not a number"),
        ("step_sleep:ms=0", "must be above 0"),
    ],
)
def test_a_bad_spec_names_what_to_write(text, words):
    with pytest.raises(ValueError, match=words):
        parse_planted(text)


def test_each_forward_waits_and_the_output_is_unchanged():
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
    x = torch.randn(3, 8)
    plain = model(x)
    handle = sleep_before_each_step(model, 20.0)
    began = time.perf_counter()
    for _ in range(3):
        slowed = model(x)
    waited = time.perf_counter() - began
    handle.remove()
    assert torch.equal(slowed, plain) and waited >= 0.06
    began = time.perf_counter()
    model(x)
    assert time.perf_counter() - began < 0.02  # removed: no sleep left behind
