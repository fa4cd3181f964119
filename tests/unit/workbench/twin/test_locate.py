"""The module stage's logic on dumps written here: first diverging module, its op, the repro, what is said.

The engine dumps are written with the backend's own writer in vLLM's names (a real engine's dumps are
in tests/integration/test_twin.py); `capture_engine_dump` is replaced by a writer of those dumps, so
what is checked is what `locate` makes of two dumps: the module, the op the manifest names, the repro at
the module's shape, the per-kind worst cosine, and the notes about what a dump cannot see.
"""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from ascend_backend.dump_format import SOURCE_ENGINE, DumpHeader, DumpMode, DumpWriter, StepRecord
from workbench.errors import WorkbenchError
from workbench.recipes import load_serving_recipe
from workbench.results.verdict import Verdict
from workbench.twin import locate as locate_module
from workbench.twin.diverge import Outcome, PromptDivergence
from workbench.twin.locate import locate, module_kind, repro_case, wants_locate, worst_cosine_by_kind
from workbench.twin.report import PairSummary, TwinVerdict
from workbench.twin.run import TwinResult, TwinSettings
from workbench.twin.sides import Side

MODULES = (
    "model.embed_tokens",
    "model.layers.0.input_layernorm",
    "model.layers.0.mlp.act_fn",
    "model.layers.0",
    "model.layers.1.post_attention_layernorm",
    "model.norm",
)
OPS = {
    "model.layers.0.input_layernorm": ("rms_norm",),
    "model.layers.0.mlp.act_fn": ("silu_and_mul",),
    "model.layers.1.post_attention_layernorm": ("add_rms_norm",),
    "model.layers.0": ("rms_norm", "silu_and_mul"),
}


def write_dump(out, prompt, steps, *, broken: str | None = None) -> None:
    header = DumpHeader(
        DumpMode.TENSORS, tuple(prompt), None, "tiny", "cpu", ("*",), source=SOURCE_ENGINE, module_ops=OPS
    )
    writer = DumpWriter(out, header)
    g = torch.Generator().manual_seed(0)
    for step in range(steps):
        rows = len(prompt) if step == 0 else 1
        writer.add_step(StepRecord(step, tuple(prompt) if step == 0 else (7,), tuple(range(rows))))
        for module in MODULES:
            tensor = torch.randn(rows, 8, generator=g)
            if module == broken:
                tensor = tensor * 1.2
            writer.add(module, step, 0, tensor, False, step=step)
        writer.checkpoint()
    writer.finish()


def twin_result(tmp_path, *, b_settings=(), batch=(4, 4), outcome=Outcome.DIVERGED) -> TwinResult:
    recipe = load_serving_recipe("cpu-tiny")
    sides = (
        Side("A", recipe=recipe, batch=batch[0]),
        Side("B", recipe=recipe.with_overrides(**dict(b_settings)), batch=batch[1]),
    )
    row = PromptDivergence(1, outcome, 2, 2, 5, 6, -1.0, -3.0, -1.0, -3.0, 4.0, False, 0.0, "diverged")
    same = PromptDivergence(0, Outcome.IDENTICAL, 4, None, None, None, None, None, None, None, None, False, 0.0, "")
    pair = PairSummary("A vs B", 2, 1, 0, 1, 0, 2, 2.0, 0.0, 0.02)
    return TwinResult(
        tmp_path,
        sides,
        ("p0", "p1"),
        ((3, 1, 4), (1, 5, 9, 2)),
        (same, row),
        pair,
        None,
        TwinVerdict(Verdict.ERROR, ("x",)),
        {},
        (),
        TwinSettings(4),
        1.0,
    )


@pytest.fixture
def fake_capture(monkeypatch):
    seen = []

    def capture(recipe, prompt, out, *, steps, **_):
        broken = "model.layers.1.post_attention_layernorm" if recipe.env.get("BREAK") else None
        seen.append((recipe.name, tuple(prompt), steps, out.name))
        write_dump(out, prompt, steps, broken=broken)

    monkeypatch.setattr(locate_module, "capture_engine_dump", capture)
    return seen


def test_the_first_diverging_module_its_op_and_a_repro_at_its_shape(tmp_path, fake_capture):
    result = twin_result(tmp_path, b_settings={"env": {"BREAK": "1"}})
    located = locate(result, progress=False)
    assert fake_capture == [("cpu-tiny", (1, 5, 9, 2), 3, "A"), ("cpu-tiny", (1, 5, 9, 2), 3, "B")]  # position 2 + 1
    assert (located.prompt, located.steps, located.first_module) == (1, 3, "model.layers.1.post_attention_layernorm")
    assert located.first_step == 0 and located.ops == ("add_rms_norm",) and located.errors == 3  # once per step
    assert located.repro.endswith("add_rms_norm__hidden-8_tokens-4__float32.py")
    assert any("add_rms_norm alone on cpu" in note and ": pass" in note for note in located.notes)
    assert located.worst_cosine_by_kind["post_attention_layernorm"] == pytest.approx(1.0)  # scaled: same direction
    assert "first diverging module: model.layers.1.post_attention_layernorm" in located.text()
    again = locate(result, progress=False)  # the finished dumps are reused, not captured again
    assert len(fake_capture) == 2 and again.first_module == located.first_module


def test_dumps_that_agree_say_what_a_dump_cannot_see(tmp_path, fake_capture):
    result = twin_result(tmp_path, b_settings={"engine": {"enforce_eager": False}}, batch=(1, 16))
    located = locate(result, progress=False)
    assert located.first_module is None and located.errors == 0 and located.repro is None
    notes = " ".join(located.notes)
    assert "graph mode itself" in notes and "needs the batch" in notes
    assert "agree at every compared module" in located.text()


def test_nothing_to_locate_and_url_sides_are_refused_with_the_way_out(tmp_path, fake_capture):
    identical = twin_result(tmp_path, outcome=Outcome.IDENTICAL)
    assert not wants_locate(identical) and wants_locate(identical, prompt=0)
    with pytest.raises(WorkbenchError, match="pass prompt=N and steps=K"):
        locate(identical, progress=False)
    forced = locate(identical, prompt=0, steps=1, progress=False)
    assert forced.steps == 1 and fake_capture[-1][1] == (3, 1, 4)
    url = twin_result(tmp_path)
    url = TwinResult(**{**url.__dict__, "sides": (Side("A", url="http://h:1"), url.sides[1])})
    assert not wants_locate(url)
    with pytest.raises(WorkbenchError, match="is a URL"):
        locate(url, progress=False)


def test_module_kinds_and_repro_cases():
    assert module_kind("model.layers.3.self_attn.qkv_proj") == "self_attn.qkv_proj"
    assert module_kind("model.layers.12") == "decoder layer" and module_kind("logits_processor") == "logits_processor"
    table = pd.DataFrame(
        {"module": ["model.layers.0.mlp", "model.layers.1.mlp", "model.norm"], "cosine": [0.99, 0.9, 1.0]}
    )
    assert worst_cosine_by_kind(table) == {"mlp": 0.9, "model.norm": 1.0}
    record = type("R", (), {"shape": (1, 6, 96)})()
    case = repro_case("silu_and_mul", record, torch.bfloat16)
    assert dict(case.params) == {"tokens": 6, "hidden": 96} and case.dtype == torch.bfloat16
    assert repro_case("vllm_cpu_paged_attention", record, torch.float32) is None  # no input builder
    attention = repro_case("paged_decode_attention", record, torch.float32)
    assert attention is not None and "num_heads" in dict(attention.params)  # the op suite's own case
