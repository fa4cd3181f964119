"""The plugin's engine recorder (ascend_backend.vllm_plugin.dump) on a model shaped like vLLM's.

The model below is called the way vLLM's runner calls one: `model(input_ids=..., positions=...)` per
forward step, then `logits_processor(lm_head, hidden)` outside the forward. Real vLLM engines are in
tests/integration/test_engine_dump.py; here each rule is checked exactly: what counts as a step, when
recording stops, what a step records, and that inputs are judged before an in-place kernel overwrites them.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn
from vllm.forward_context import ForwardContext, override_forward_context

from ascend_backend.dump_format import DumpMode, DumpWriter
from ascend_backend.vllm_plugin.dump import DumpRequest, DumpSpecError, attach_recorder, engine_step_is_real
from workbench.accuracy.dump_format import WorkbenchDump

HIDDEN = 4


class InPlaceScale(nn.Module):
    """Scales its input in place, as vLLM's fused add + RMSNorm kernels overwrite theirs."""

    def __init__(self) -> None:
        super().__init__()
        self.factor = 2.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mul_(self.factor)


class Layer(nn.Module):
    """Returns (hidden, residual) like vLLM's decoder layers."""

    def __init__(self) -> None:
        super().__init__()
        self.input_layernorm = InPlaceScale()
        self.mlp = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, positions, hidden, residual):
        residual = hidden if residual is None else hidden + residual
        return self.mlp(self.input_layernorm(hidden.clone())), residual


class Inner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(16, HIDDEN)
        self.layers = nn.ModuleList([Layer(), Layer()])
        self.norm = nn.LayerNorm(HIDDEN)


class LogitsProcessor(nn.Module):
    def forward(self, lm_head: nn.Linear, hidden: torch.Tensor) -> torch.Tensor:
        return lm_head(hidden)


class EngineModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.model = Inner()
        self.lm_head = nn.Linear(HIDDEN, 16, bias=False)
        self.logits_processor = LogitsProcessor()

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        hidden, residual = self.model.embed_tokens(input_ids), None  # [T, H]
        for layer in self.model.layers:
            hidden, residual = layer(positions, hidden, residual)
        return self.model.norm(hidden + residual)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.logits_processor(self.lm_head, hidden[-1:])  # one sequence: its last token


def run_steps(model: EngineModel, prompt: list[int], decodes: int) -> None:
    """A prefill of `prompt` then `decodes` one-token steps, as vLLM's runner drives them."""
    ids, pos = torch.tensor(prompt), torch.arange(len(prompt))
    with torch.no_grad():
        for _ in range(decodes + 1):
            logits = model.compute_logits(model(input_ids=ids, positions=pos))
            ids, pos = logits.argmax(-1), pos[-1:] + 1


def record(tmp_path, request_text: str, model: EngineModel | None = None, decodes: int = 3):
    model = model or EngineModel()
    request = DumpRequest.parse(request_text.format(dir=tmp_path / "dump"))
    recorder = attach_recorder(model, request, "toy", enforce_eager=True)
    run_steps(model, [3, 1, 4, 1, 5], decodes)
    return recorder, WorkbenchDump(tmp_path / "dump")


def test_spec_parses_and_round_trips(tmp_path):
    request = DumpRequest.parse(f"dir={tmp_path};steps=3;modules=model.layers.*,logits_processor;layers=0,2-3")
    assert (request.steps, request.modules, request.layers) == (
        3,
        ("model.layers.*", "logits_processor"),
        frozenset({0, 2, 3}),
    )
    assert DumpRequest.parse(request.to_env()) == request
    bare = DumpRequest.parse(str(tmp_path))
    assert (bare.directory, bare.steps, bare.modules, bare.mode) == (tmp_path, 1, ("*",), DumpMode.TENSORS)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("steps=2", "names no directory"),
        ("dir=/x;steps=0", "at least one forward step"),
        ("dir=/x;step=2", "use dir=PATH;steps=N"),
        ("dir=/x;layers=3-1", "not a range"),
        ("dir=/x;mode=fast", "mode is tensors or stats"),
        ("", "is empty"),
    ],
)
def test_bad_specs_say_how_to_write_them(text, words):
    with pytest.raises(DumpSpecError, match=words):
        DumpRequest.parse(text)


def test_layers_filter_only_decoder_layers():
    request = DumpRequest.parse("dir=/x;modules=*;layers=1")
    assert request.selects("model.layers.1.mlp") and request.selects("model.layers.1")
    assert not request.selects("model.layers.0.mlp") and not request.selects("model.layers.10")
    assert request.selects("model.embed_tokens") and request.selects("logits_processor")


def test_records_the_first_n_steps_then_removes_its_hooks(tmp_path):
    model = EngineModel()
    recorder, dump = record(tmp_path, "dir={dir};steps=2", model=model)
    assert recorder.state.value == "done"
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
    assert [s.step for s in dump.steps] == [0, 1]
    assert [s.positions for s in dump.steps] == [(0, 1, 2, 3, 4), (5,)]
    assert dump.steps[0].token_ids == (3, 1, 4, 1, 5) and dump.prompt_token_ids == (3, 1, 4, 1, 5)
    assert {r.step for r in dump.records} == {0, 1}  # decodes 2 and 3 ran unrecorded
    layer0 = [r for r in dump.records if r.module == "model.layers.0"]
    assert [(r.call, r.output_index, r.shape) for r in layer0] == [
        (0, 0, (5, HIDDEN)),
        (0, 1, (5, HIDDEN)),
        (1, 0, (1, HIDDEN)),
        (1, 1, (1, HIDDEN)),
    ]
    logits = [r for r in dump.records if r.module == "logits_processor"]
    assert [(r.step, r.shape) for r in logits] == [(0, (1, 16)), (1, (1, 16))]  # the last step's logits too
    assert dump.header.source == "vllm-engine" and dump.header.model == "toy"


def test_hooks_are_gone_after_the_last_step(tmp_path):
    model = EngineModel()
    record(tmp_path, "dir={dir};steps=1", model=model)
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_module_patterns_and_stats_mode(tmp_path):
    _, dump = record(tmp_path, "dir={dir};steps=1;modules=model.layers.*;layers=1;mode=stats")
    assert {r.module for r in dump.records} == {
        "model.layers.1",
        "model.layers.1.input_layernorm",
        "model.layers.1.mlp",
    }
    assert dump.mode is DumpMode.STATS and all(r.file is None for r in dump.records)


def test_inputs_are_judged_before_an_in_place_kernel_overwrites_them(tmp_path):
    model = EngineModel()
    model.model.layers[1].input_layernorm.factor = float("nan")
    _, dump = record(tmp_path, "dir={dir};steps=1", model=model)
    norm = next(r for r in dump.records if r.module == "model.layers.1.input_layernorm")
    assert norm.nonfinite and norm.inputs_nonfinite is False  # its input held NaN only after it ran
    origin = next(r for r in dump.records if r.nonfinite and r.inputs_nonfinite is False)
    assert origin.module == "model.layers.1.input_layernorm"


def test_dummy_runs_do_not_count_as_steps(tmp_path):
    model = EngineModel()
    request = DumpRequest.parse(f"dir={tmp_path / 'dump'};steps=1")
    attach_recorder(model, request, "toy", enforce_eager=True)
    ids, pos = torch.tensor([1, 2]), torch.arange(2)
    dummy = ForwardContext(no_compile_layers={}, attn_metadata=None, slot_mapping={})  # vLLM's profile run
    real = ForwardContext(
        no_compile_layers={}, attn_metadata={"model.layers.0.self_attn.attn": object()}, slot_mapping={}
    )
    with torch.no_grad():
        with override_forward_context(dummy):
            assert not engine_step_is_real()
            model.compute_logits(model(input_ids=torch.zeros(8, dtype=torch.long), positions=torch.zeros(8)))
        with override_forward_context(real):
            assert engine_step_is_real()
            model.compute_logits(model(input_ids=ids, positions=pos))
    dump = WorkbenchDump(tmp_path / "dump")
    assert [s.positions for s in dump.steps] == [(0, 1)]
    assert {r.shape[0] for r in dump.records if r.module == "model.embed_tokens"} == {2}


def test_a_step_cut_short_leaves_a_readable_dump_of_the_finished_ones(tmp_path):
    model = EngineModel()
    request = DumpRequest.parse(f"dir={tmp_path / 'dump'};steps=5")
    recorder = attach_recorder(model, request, "toy", enforce_eager=True)
    run_steps(model, [1, 2, 3], decodes=1)  # two of five steps ran: the server stopped
    # the engine died inside a third step: a record was written, the step never finished
    recorder.writer.add("model.embed_tokens", 9, 0, torch.ones(1, HIDDEN), False, step=2)
    dump = WorkbenchDump(tmp_path / "dump")
    assert {r.step for r in dump.records} == {0, 1} and [s.step for s in dump.steps] == [0, 1]
    manifest = json.loads((tmp_path / "dump" / "manifest.json").read_text())
    assert manifest["complete"] is True and manifest["record_count"] == len(dump.records)


def test_a_non_eager_engine_and_a_used_directory_are_refused(tmp_path):
    request = DumpRequest.parse(f"dir={tmp_path / 'dump'};steps=1")
    with pytest.raises(DumpSpecError, match="--enforce-eager"):
        attach_recorder(EngineModel(), request, "toy", enforce_eager=False)
    (tmp_path / "dump").mkdir()
    (tmp_path / "dump" / "keep.txt").write_text("earlier")
    with pytest.raises(FileExistsError, match="not empty"):
        attach_recorder(EngineModel(), request, "toy", enforce_eager=True)
    assert (tmp_path / "dump" / "keep.txt").read_text() == "earlier"


def test_writer_is_the_backends_and_the_workbench_reuses_it():
    from workbench.accuracy import dump_format

    assert dump_format.DumpHeader is __import__("ascend_backend.dump_format").dump_format.DumpHeader
    assert dump_format.open_writer.__module__ == "workbench.accuracy.dump_format"
    assert DumpWriter.__module__ == "ascend_backend.dump_format"


class RegistryNorm(nn.Module):
    """A norm that runs the registry's `rms_norm`, as the plugin's RMSNorm override does inside vLLM."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(HIDDEN))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from ascend_backend.registry import REGISTRY

        return REGISTRY.dispatch("rms_norm", x.device, x, self.weight, 1e-6)


def test_the_manifest_names_the_registry_ops_each_module_ran(tmp_path):
    model = EngineModel()
    model.model.layers[1].input_layernorm = RegistryNorm()
    _, dump = record(tmp_path, "dir={dir};steps=1", model=model)
    ops = dump.header.module_ops
    assert ops["model.layers.1.input_layernorm"] == ("rms_norm",)
    assert ops["model.layers.1"] == ("rms_norm",) and ops["<root>"] == ("rms_norm",)  # enclosing modules too
    assert ops["model.layers.0.input_layernorm"] == () and ops["model.layers.1.mlp"] == ()
    assert dump.header.parallel is None  # one process: no tensor-parallel layouts
