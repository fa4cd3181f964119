"""Sides of a twin run from the verb's flags: ordered sources, --set on a side, per-side batches."""

from __future__ import annotations

import pytest

from workbench.errors import WorkbenchError
from workbench.recipes import load_serving_recipe
from workbench.twin.sides import make_sides, parse_setting


def test_one_recipe_with_a_setting_on_b_makes_a_tp_twin():
    a, b = make_sides([("recipe", "cpu-tiny")], load_serving_recipe, settings=["B:engine.tensor_parallel_size=2"])
    assert a.recipe.engine.tensor_parallel_size == 1 and b.recipe.engine.tensor_parallel_size == 2
    assert b.settings == ("B:engine.tensor_parallel_size=2",) and a.settings == ()
    assert b.describe() == "cpu-tiny (TP=2, eager, float32), batch 1"


def test_settings_parse_yaml_values_and_merge_env():
    assert parse_setting("b:engine.enforce_eager=false") == ("B", "engine.enforce_eager", False)
    fault = "B:env.ASCEND_BACKEND_FAULT=silu_and_mul:scale:factor=1.1"
    a, b = make_sides([("recipe", "cpu-tiny")], load_serving_recipe, settings=[fault], batches=[1, 16])
    assert b.recipe.env["ASCEND_BACKEND_FAULT"] == "silu_and_mul:scale:factor=1.1"
    assert b.recipe.env["VLLM_CPU_KVCACHE_SPACE"] == "1"  # merged into the recipe's own env
    assert "ASCEND_BACKEND_FAULT" not in a.recipe.env and (a.batch, b.batch) == (1, 16)


@pytest.mark.parametrize(
    ("sources", "settings", "batches", "words"),
    [
        ([], [], [1], "two sides"),
        ([("recipe", "cpu-tiny")] * 3, [], [1], "two sides"),
        ([("recipe", "cpu-tiny")], ["C:engine.block_size=64"], [1], "SIDE A or B"),
        ([("recipe", "cpu-tiny")], ["B:engine.max_num_seq=4"], [1], "max_num_seqs"),  # the reader's typo hint
        ([("recipe", "cpu-tiny")], ["B:engine.block_size=0"], [1], "greater than or equal"),
        ([("url", "http://h:1"), ("recipe", "cpu-tiny")], ["A:dtype=float16"], [1], "is a URL"),
        ([("url", "http://h:1")], [], [1], "compares a server with itself"),
        ([("recipe", "cpu-tiny")], [], [1, 2, 3], "one value"),
        ([("recipe", "no-such-recipe")], [], [1], "no-such-recipe"),
    ],
)
def test_bad_sides_say_what_to_write(sources, settings, batches, words):
    with pytest.raises(WorkbenchError, match=words):
        make_sides(sources, load_serving_recipe, settings=settings, batches=batches)


def test_url_sides_keep_their_order():
    a, b = make_sides([("url", "http://gpu:8000"), ("url", "http://npu:8000")], load_serving_recipe)
    assert (a.url, b.url, a.launched) == ("http://gpu:8000", "http://npu:8000", False)
