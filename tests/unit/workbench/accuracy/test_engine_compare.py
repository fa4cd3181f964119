"""An engine dump (vLLM's names, layouts and steps) against a transformers float32 dump: the mapping.

The engine dump here is written from the transformers dump itself, laid out the way vLLM's modules
hand their outputs to the plugin's hooks (fused qkv_proj / gate_up_proj, a decoder layer's
(hidden, residual) pair, [num_tokens, hidden] rows, one prefill step then one-token decode steps,
logits for the last token only). So every mapped row must agree exactly, every engine-only module
must be named as not compared with its reason, and a NaN written into one engine output must be found
there. Real engines: tests/integration/test_engine_dump.py.
"""

from __future__ import annotations

import pytest
import torch

from ascend_backend.dump_format import SOURCE_ENGINE, DumpHeader, DumpMode, DumpWriter, StepRecord
from workbench.accuracy.dump_compare import compare_dumps
from workbench.accuracy.dump_format import WorkbenchDump
from workbench.accuracy.vllm_names import Level, Mapping, Unmapped, map_module
from workbench.errors import WorkbenchError

pytest.importorskip("transformers")
PROMPT_LEN = 7  # the engine's prompt; the reference runs on prompt + 2 generated tokens
LAYERS = 4  # the tiny model


IDS = [5, 17, 300, 42, 7, 99, 1024, 3, 64]


def capture_reference(out, ids: list[int]) -> WorkbenchDump:
    from workbench.accuracy.dump import capture_dump, load_causal_lm
    from workbench.embedded_models.catalog import prepare

    model = load_causal_lm(prepare("tiny"), torch.float32, "cpu")
    capture_dump(model, {"input_ids": torch.tensor([ids])}, out, prompt_token_ids=ids)
    return WorkbenchDump(out)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return capture_reference(tmp_path_factory.mktemp("ref") / "dump", IDS)


def rows(reference: WorkbenchDump, module: str, positions: list[int]) -> torch.Tensor:
    record = next(r for r in reference.records if r.module == module and r.output_index == 0)
    tensor = reference.load(record)
    return tensor.reshape(-1, tensor.shape[-1])[positions]  # [T, F]


def write_engine_dump(reference: WorkbenchDump, out, *, nan_at: tuple[str, int] | None = None) -> None:
    """vLLM's view of the same forward steps, from the reference's tensors (see the module docstring)."""
    ids = reference.prompt_token_ids
    header = DumpHeader(DumpMode.TENSORS, ids[:PROMPT_LEN], None, "tiny", "cpu", ("*",), source=SOURCE_ENGINE)
    writer = DumpWriter(out, header)
    calls: dict[str, int] = {}
    poisoned = False

    def add(module: str, step: int, *tensors: torch.Tensor) -> None:
        nonlocal poisoned
        inputs_bad = poisoned
        if nan_at == (module, step):
            tensors, poisoned = tuple(torch.full_like(t, float("nan")) for t in tensors), True
        elif poisoned:
            tensors = tuple(torch.full_like(t, float("nan")) for t in tensors)
        call = calls.get(module, 0)
        calls[module] = call + 1
        for index, tensor in enumerate(tensors):
            writer.add(module, call, index, tensor, inputs_bad, step=step)

    for step in range(len(IDS) - PROMPT_LEN + 1):
        pos = list(range(PROMPT_LEN)) if step == 0 else [PROMPT_LEN + step - 1]
        writer.add_step(StepRecord(step, tuple(ids[p] for p in pos), tuple(pos)))
        add("model.embed_tokens", step, rows(reference, "model.embed_tokens", pos))
        for i in range(LAYERS):
            p = f"model.layers.{i}"
            residual = torch.randn(len(pos), 256, generator=torch.Generator().manual_seed(i))
            add(f"{p}.input_layernorm", step, rows(reference, f"{p}.input_layernorm", pos), residual)
            qkv = torch.cat([rows(reference, f"{p}.self_attn.{x}_proj", pos) for x in "qkv"], dim=-1)
            add(f"{p}.self_attn.qkv_proj", step, qkv)
            add(f"{p}.self_attn.rotary_emb", step, qkv[:, :256], qkv[:, 256:384])
            add(f"{p}.self_attn.o_proj", step, rows(reference, f"{p}.self_attn.o_proj", pos))
            add(f"{p}.self_attn", step, rows(reference, f"{p}.self_attn", pos))
            add(f"{p}.post_attention_layernorm", step, rows(reference, f"{p}.post_attention_layernorm", pos), residual)
            gate, up = (rows(reference, f"{p}.mlp.{x}_proj", pos) for x in ("gate", "up"))
            add(f"{p}.mlp.gate_up_proj", step, torch.cat([gate, up], dim=-1))
            add(f"{p}.mlp.act_fn", step, torch.nn.functional.silu(gate) * up)
            add(f"{p}.mlp.down_proj", step, rows(reference, f"{p}.mlp.down_proj", pos))
            add(f"{p}.mlp", step, rows(reference, f"{p}.mlp", pos))
            layer = rows(reference, p, pos)
            add(p, step, layer - residual, residual)  # vLLM hands back (hidden, residual); their sum is the output
        add("model.norm", step, rows(reference, "model.norm", pos), rows(reference, f"model.layers.{LAYERS - 1}", pos))
        add("logits_processor", step, rows(reference, "lm_head", pos[-1:]))
        writer.checkpoint()
    writer.finish()


def test_name_mapping_levels():
    assert map_module("model.layers.3.self_attn.qkv_proj") == Mapping(
        "model.layers.3.self_attn.qkv_proj",
        Level.SPLIT,
        ("model.layers.3.self_attn.q_proj", "model.layers.3.self_attn.k_proj", "model.layers.3.self_attn.v_proj"),
    )
    assert map_module("model.layers.0.mlp.gate_up_proj").reference_modules == (
        "model.layers.0.mlp.gate_proj",
        "model.layers.0.mlp.up_proj",
    )
    assert map_module("model.layers.12") == Mapping("model.layers.12", Level.SUM, ("model.layers.12",), (0, 1))
    assert map_module("logits_processor").level is Level.LAST_TOKEN
    assert map_module("model.layers.1.post_attention_layernorm").level is Level.MODULE
    for name in (
        "model.layers.0.self_attn.rotary_emb",
        "model.layers.0.self_attn.attn",
        "model.layers.0.mlp.act_fn",
        "<root>",
        "lm_head",
    ):
        assert isinstance(map_module(name), Unmapped)


def test_engine_dump_agrees_with_its_reference_at_every_level(reference, tmp_path):
    write_engine_dump(reference, tmp_path / "engine")
    result = compare_dumps(tmp_path / "engine", reference.path)
    s, table = result.summary, result.table
    per_step = (
        1 + LAYERS * (1 + 3 + 1 + 1 + 1 + 2 + 1 + 1 + 1) + 1 + 1
    )  # embed, layers (q/k/v, gate/up split), norm, logits
    assert s.compared == 3 * per_step and s.errors == 0 and s.warnings == 0
    assert table["max_abs_err"].max() <= 1e-6  # the layer sum is recomputed in float32: rounding only
    assert set(table["level"]) == {"module", "split", "hidden+residual", "last token"}
    assert table.loc[table["key"] == "model.layers.2.call1.output.0", "level"].item() == "hidden+residual"
    assert table.loc[table["key"] == "model.layers.0.self_attn.k_proj.call2.output.0", "shape"].item() == "[1, 128]"
    assert table.loc[table["key"] == "lm_head.output.0", "shape"].item() == "[1, 2048]"
    assert sorted(set(table["step"])) == [0, 1, 2]
    notes = " | ".join(s.mapping)
    assert "steps compared: 0, 1, 2 (prefill of 7 tokens, 2 decode)" in notes
    assert "act_fn" in notes and "rotary_emb" in notes and "silu(gate) * up" in notes
    assert s.nan_origin is None and s.engine_nan_origin is None


def test_a_nan_in_one_engine_output_is_the_first_divergence_and_the_origin(reference, tmp_path):
    write_engine_dump(reference, tmp_path / "engine", nan_at=("model.layers.2.post_attention_layernorm", 1))
    s = compare_dumps(tmp_path / "engine", reference.path).summary
    assert s.first_divergence == "model.layers.2.post_attention_layernorm.call1.output.0"
    assert s.nan_origin == "model.layers.2.post_attention_layernorm.call1.output.0"
    assert s.engine_nan_origin == "model.layers.2.post_attention_layernorm (step 1)"
    assert s.errors > 0


def test_steps_beyond_the_reference_are_named_not_compared(reference, tmp_path):
    write_engine_dump(reference, tmp_path / "engine")
    short = capture_reference(tmp_path / "short", IDS[:8])  # the prompt and one generated token
    s = compare_dumps(tmp_path / "engine", short.path).summary
    assert s.errors == 0 and "steps compared: 0, 1 " in s.mapping[0]
    assert any("step 2 (positions 8..8) not compared: the reference holds 8 tokens" in note for note in s.mapping)


def test_mismatched_prompts_and_wrong_roles_are_refused(reference, tmp_path):
    write_engine_dump(reference, tmp_path / "engine")
    steps = tmp_path / "engine" / "steps.jsonl"
    steps.write_text(steps.read_text().replace('"token_ids": [5, 17', '"token_ids": [6, 17', 1))
    with pytest.raises(WorkbenchError, match="different prompts"):
        compare_dumps(tmp_path / "engine", reference.path)
    with pytest.raises(WorkbenchError, match="give the engine dump as TEST"):
        compare_dumps(reference.path, tmp_path / "engine")


def test_two_engine_dumps_compare_name_by_name(reference, tmp_path):
    write_engine_dump(reference, tmp_path / "a")
    write_engine_dump(reference, tmp_path / "b", nan_at=("model.layers.1.mlp", 0))
    s = compare_dumps(tmp_path / "b", tmp_path / "a").summary
    assert s.mapping == () and s.nan_origin == "model.layers.1.mlp.output.0"
    assert s.first_divergence == "model.layers.1.mlp.output.0"


def test_steps_after_the_engine_generated_another_token_are_not_compared(reference, tmp_path):
    write_engine_dump(reference, tmp_path / "engine")
    steps = tmp_path / "engine" / "steps.jsonl"
    lines = steps.read_text().splitlines()
    lines[2] = lines[2].replace('"token_ids": [64]', '"token_ids": [65]')  # step 2 fed another token than IDS[8]
    steps.write_text("\n".join(lines) + "\n")
    s = compare_dumps(tmp_path / "engine", reference.path).summary
    assert s.errors == 0 and "steps compared: 0, 1 " in s.mapping[0]
    assert any("step 2 not compared: the engine fed token(s) [65] at position 8" in note for note in s.mapping)
