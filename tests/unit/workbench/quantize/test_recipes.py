"""The shipped W8A8 recipes: the serving recipe, the sweep where quantization is a value, the embedded model."""

from __future__ import annotations

from workbench.embedded_models.catalog import EmbeddedModel, model_recipe
from workbench.recipes import load_serving_recipe
from workbench.sweep.spec import expand, load_sweep_spec


def test_the_w8a8_serving_recipe_matches_the_float_one_but_for_the_model():
    w8a8, float_ = load_serving_recipe("cpu-smollm2-w8a8"), load_serving_recipe("cpu-smollm2")
    assert w8a8.embedded_model == "smollm2-w8a8"
    assert "--quantization" in w8a8.engine.cli_args() and "compressed-tensors" in w8a8.engine.cli_args()
    assert w8a8.engine.model_copy(update={"quantization": None}) == float_.engine
    assert (w8a8.dtype, w8a8.max_model_len, w8a8.env) == (float_.dtype, float_.max_model_len, float_.env)


def test_the_sweep_has_quantization_as_a_value():
    points = expand(load_sweep_spec("cpu-smollm2-w8a8"))
    assert {dict(p.params)["quantization"] for p in points} == {"compressed-tensors"}
    assert {p.recipe.engine.quantization for p in points} == {"compressed-tensors"}
    assert len({p.server_key for p in points}) == 2


def test_the_embedded_w8a8_model_names_its_scheme_and_source_in_its_fingerprint():
    recipe = model_recipe(EmbeddedModel.SMOLLM2_W8A8)
    fingerprint = recipe.fingerprint()
    assert "w8a8-dynamic" in fingerprint and "compressed-tensors" in fingerprint
    assert model_recipe(EmbeddedModel.SMOLLM2).fingerprint() in fingerprint  # a new smollm2 build invalidates it
