"""Typed sides (`twin.sides`), and the verb's translation of --recipe / --url / --trace / --set / --batch into them."""

from __future__ import annotations

import argparse

import pytest

from workbench.errors import WorkbenchError
from workbench.recipes import load_serving_recipe
from workbench.twin.sides import Side, apply_changes, same_server
from workbench.verbs import twin as verb


def flags(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    verb.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_a_change_on_b_makes_a_tp_twin_described_by_its_effect():
    recipe = load_serving_recipe("cpu-tiny")
    a, b = Side.of_recipe("A", recipe), Side.of_recipe("B", recipe, {"engine.tensor_parallel_size": 2})
    assert a.recipe.engine.tensor_parallel_size == 1 and b.recipe.engine.tensor_parallel_size == 2
    assert b.changes == (("engine.tensor_parallel_size", 2),) and a.changes == ()
    assert b.describe() == "cpu-tiny (TP=2, eager, float32), batch 1"
    assert not same_server(a, b) and same_server(a, Side.of_recipe("B", recipe))


def test_env_changes_merge_into_the_recipes_own_env_and_show_in_the_description():
    recipe = load_serving_recipe("cpu-tiny")
    b = Side.of_recipe("B", recipe, {"env.ASCEND_BACKEND_FAULT": "silu_and_mul:delay:ms=2"}, batch=16)
    assert b.recipe.env["ASCEND_BACKEND_FAULT"] == "silu_and_mul:delay:ms=2"
    assert b.recipe.env["VLLM_CPU_KVCACHE_SPACE"] == "1"  # merged, not replaced
    assert "env.ASCEND_BACKEND_FAULT=silu_and_mul:delay:ms=2" in b.describe() and b.batch == 16


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda r: Side("C", recipe=r), "sides are A and B"),
        (lambda r: Side("A", recipe=r, url="http://h:1"), "exactly one of a recipe or a URL"),
        (lambda r: Side("A", recipe=r, batch=0), "at least one prompt"),
        (lambda r: Side("A", recipe=r, trace="t.json"), "goes with a URL side"),
        (lambda r: Side.of_recipe("B", r, {"engine.max_num_seq": 4}), "max_num_seqs"),  # the reader's typo hint
        (lambda r: Side.of_recipe("B", r, {"engine.block_size": 0}), "greater than or equal"),
        (lambda r: apply_changes(r, (("sampler.top_k", 1),)), "only engine.\\* and env.\\* are nested"),
    ],
)
def test_bad_sides_name_the_field_and_the_fix(make, words):
    with pytest.raises(WorkbenchError, match=words):
        make(load_serving_recipe("cpu-tiny"))


def test_the_verb_turns_flags_into_typed_sides_in_the_order_given():
    a, b = verb.make_sides(flags("--recipe", "cpu-tiny", "--set", "b:engine.enforce_eager=false", "--batch", "1", "16"))
    assert (a.batch, b.batch) == (1, 16) and b.recipe.engine.enforce_eager is False
    assert b.changes == (("engine.enforce_eager", False),)  # the value is YAML
    a, b = verb.make_sides(flags("--url", "http://gpu:8000", "--trace", "gpu.pt.trace.json.gz", "--recipe", "cpu-tiny"))
    assert (a.url, str(a.trace), b.recipe.name) == ("http://gpu:8000", "gpu.pt.trace.json.gz", "cpu-tiny")


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        ((), "two sides"),
        (("--recipe", "cpu-tiny") * 3, "two sides"),
        (("--recipe", "cpu-tiny", "--set", "C:engine.block_size=64"), "SIDE A or B"),
        (("--url", "http://h:1", "--recipe", "cpu-tiny", "--set", "A:dtype=float16"), "is a URL"),
        (("--url", "http://h:1"), "compares a server with itself"),
        (("--recipe", "cpu-tiny", "--batch", "1", "2", "3"), "one value"),
        (("--recipe", "no-such-recipe"), "no-such-recipe"),
    ],
)
def test_bad_flags_say_what_to_write(argv, words):
    with pytest.raises(WorkbenchError, match=words):
        verb.make_sides(flags(*argv))


def test_a_trace_must_follow_its_url():
    with pytest.raises(SystemExit):
        flags("--recipe", "cpu-tiny", "--trace", "gpu.pt.trace.json.gz")
