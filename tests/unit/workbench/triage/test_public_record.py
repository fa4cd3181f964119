"""The public record (tests/fixtures/public/): the corpus is well formed, split once by a hash of each thread,
and the development half keeps the figures it was tuned to. The test half is measured by
`benchmarks/bench_public_record.py`, never asserted here (a test that fails when the held-out half drops
would invite tuning on it)."""

from __future__ import annotations

import importlib.util
import sys
from functools import cache

import pytest

from tests.conftest import REPO_ROOT


@cache
def _bench():
    spec = importlib.util.spec_from_file_location(
        "bench_public_record", REPO_ROOT / "benchmarks" / "bench_public_record.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def corpus():
    return _bench().load_corpus()


def test_every_thread_file_names_its_source_its_verdict_and_what_it_holds(corpus):
    assert _bench().corpus_problems(corpus) == []
    assert len(corpus) >= 500
    names = [t.name for t in corpus]
    assert len(set(names)) == len(names)


def test_the_halves_come_from_a_hash_of_the_thread_and_are_both_substantial(corpus):
    bench = _bench()
    assert bench.half_of("vllm-project/vllm-ascend", 2266) == "dev"
    assert bench.half_of("vllm-project/vllm-ascend", 5580) == "test"
    halves = [t.half for t in corpus]
    assert min(halves.count("dev"), halves.count("test")) >= 0.4 * len(corpus)


# Development-half figures below their target, each with the floor it must keep and why (eighth round, #47):
# every other target must be met.
BELOW_TARGET = {
    # unclear threads whose logs name no cause (ERR01100 without its CANN code, a tensor left on the CPU,
    # an engine that died) are `unknown`, the right answer for them (docs/public_record.md, eighth round)
    "triage_known": 0.88,
}


def test_the_development_half_meets_every_target(corpus):
    bench = _bench()
    figures = bench.figures(bench.score([t for t in corpus if t.half == "dev"]))["dev"]
    for key, floor in BELOW_TARGET.items():
        assert figures[key] >= floor, f"{key} {figures[key]:.3f}"
    assert bench.meets_targets({k: v for k, v in figures.items() if k not in BELOW_TARGET}) == []
    assert figures["triage_logs"] >= 55 and figures["readers_pastes"] >= 40 and figures["lint_fine"] >= 3000
    # every development paste still read whole however it arrives (benchmarks/mangling.py)
    assert set(figures["readers_mangled"].values()) == {1.0} and figures["readers_mangled_false_reads"] == 0
    assert set(figures["triage_carried"].values()) == {1.0}  # every log read the same whatever carried it
