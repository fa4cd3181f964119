"""Layer-level fault hunting end to end on the tiny model: executor dumps vs transformers float32."""

from __future__ import annotations

import pytest

from workbench.accuracy import layer_compare
from workbench.accuracy.layer_compare import FaultRequest, layer_ticks

pytest.importorskip("transformers")
PROMPT = "The quick brown fox jumps over the lazy dog, and then"


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    from workbench.embedded_models.catalog import prepare

    model_dir = prepare("tiny")
    ids = layer_compare.prompt_ids(model_dir, PROMPT)
    ref = layer_compare.capture_reference(model_dir, ids, tmp_path_factory.mktemp("ref") / "dump")
    return model_dir, ids, ref


def test_clean_executor_agrees_with_transformers(reference, tmp_path):
    model_dir, ids, ref = reference
    test = layer_compare.capture_executor(model_dir, ids, tmp_path / "dump")
    result = layer_compare.compare(test, ref)
    s = result.summary
    assert s.compared >= 4 * 5 + 3  # per layer: norms, attention, mlp, layer output; plus embed, norm, head
    assert s.errors == 0 and s.nan_origin is None, layer_compare.verdict_table(result).to_string()
    assert s.worst_cosine > 0.9999


def test_nan_in_layer2_input_norm_is_the_nan_origin(reference, tmp_path):
    model_dir, ids, ref = reference
    fault = FaultRequest("rms_norm", "nan", module="model.layers.2.input_layernorm")
    result = layer_compare.compare(layer_compare.capture_executor(model_dir, ids, tmp_path / "dump", fault=fault), ref)
    assert result.summary.nan_origin == "model.layers.2.input_layernorm.output.0"
    assert result.summary.first_divergence == "model.layers.2.input_layernorm.output.0"


def test_one_percent_scale_in_layer1_mlp_is_the_first_divergence(reference, tmp_path):
    model_dir, ids, ref = reference
    fault = FaultRequest("silu_and_mul", "scale", module="model.layers.1.mlp", factor=1.01)
    result = layer_compare.compare(layer_compare.capture_executor(model_dir, ids, tmp_path / "dump", fault=fault), ref)
    assert result.summary.first_divergence == "model.layers.1.mlp.output.0"
    assert result.summary.nan_origin is None
    figure = layer_compare.layer_curves(result)
    assert len(figure.data) == 2 and figure.layout.shapes  # the divergence is marked


def test_layer_ticks_label_a_few_decoder_layers_whatever_the_depth():
    keys = ["model.embed_tokens"] + [f"model.layers.{i}.{part}" for i in range(30) for part in ("attn", "mlp")]
    keys.append("lm_head")
    ticks = layer_ticks(keys)
    assert ticks[1] == "layer 0" and ticks[7] == "layer 3" and len(ticks) == 10  # every 3rd of 30 layers
    assert all(keys[i].startswith(f"model.layers.{label.split()[1]}.") for i, label in ticks.items())
    assert layer_ticks(["embed", "lm_head"]) == {}
