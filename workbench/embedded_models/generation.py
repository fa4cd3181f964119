"""One prompt in, generated text and token ids out, on a chosen engine, device and dtype.

This is the in-process path behind `ascend-workbench generate`: a quick look at what a model says
without starting a server, and the per-device reference for accuracy work (the same prompt greedy on
CPU float32 and on the NPU should give the same tokens, or the first differing position is the lead).

Engines, each a function `EngineCall -> EngineOutput` in `ENGINES` (prompt ids in, generated ids out;
tokenization, chat template and the finish reason are shared):
- `transformers`: Hugging Face `generate` on torch; runs anywhere, the reference.
- `executor`: the backend's own model executor (`ascend_backend.models.Executor`), on registry ops
  and the paged KV cache. Where that package cannot be imported it raises a clear error.
Greedy by default (temperature 0); temperature > 0 samples with a fixed seed.
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from workbench.embedded_models.catalog import resolve_model
from workbench.errors import WorkbenchError

DTYPES = ("auto", "float32", "bfloat16", "float16")


class Engine(str, enum.Enum):
    TRANSFORMERS = "transformers"
    EXECUTOR = "executor"


class FinishReason(str, enum.Enum):
    STOP = "stop"  # an end-of-sequence token was generated (it is the last of `token_ids`)
    LENGTH = "length"  # max_tokens reached


@dataclass(frozen=True)
class GenerationRequest:
    model: str  # "tiny", "smollm2" or a Hugging Face checkpoint directory
    prompt: str
    max_tokens: int = 32
    engine: Engine = Engine.TRANSFORMERS
    device: str = "cpu"  # cpu, cuda[:N], npu[:N], or auto (best device ascend_backend detects)
    dtype: str = "auto"  # auto = float32 on cpu (the accuracy reference), else the checkpoint's dtype
    chat: bool = False  # wrap the prompt as one user message with the model's chat template
    temperature: float = 0.0  # 0 = greedy
    seed: int = 0

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise WorkbenchError(f"--max-tokens must be at least 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise WorkbenchError(f"--temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if self.dtype not in DTYPES:
            raise WorkbenchError(f"--dtype {self.dtype!r} is not one of: {', '.join(DTYPES)}")


@dataclass(frozen=True)
class GenerationResult:
    model_dir: Path
    engine: Engine
    device: str
    dtype: str
    prompt_text: str  # the prompt as fed to the tokenizer (after the chat template, if any)
    prompt_token_ids: tuple[int, ...]
    token_ids: tuple[int, ...]  # generated ids only, including a final end-of-sequence id if any
    text: str  # decoded `token_ids`, special tokens left out
    finish_reason: FinishReason
    seconds: float  # wall time of generation, model loading excluded

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_dir": str(self.model_dir),
            "engine": self.engine.value,
            "device": self.device,
            "dtype": self.dtype,
            "prompt": self.prompt_text,
            "prompt_token_ids": list(self.prompt_token_ids),
            "token_ids": list(self.token_ids),
            "text": self.text,
            "finish_reason": self.finish_reason.value,
            "seconds": round(self.seconds, 4),
        }


@dataclass(frozen=True)
class EngineCall:
    """What an engine gets: the prompt already rendered and tokenized, device and dtype resolved."""

    model_dir: Path
    prompt_ids: tuple[int, ...]
    stop_ids: tuple[int, ...]  # end-of-sequence ids from the checkpoint's configs and tokenizer
    device: Any  # torch.device
    dtype: Any  # torch.dtype
    request: GenerationRequest


@dataclass(frozen=True)
class EngineOutput:
    token_ids: tuple[int, ...]  # generated ids only
    seconds: float  # generation wall time, model loading excluded


def generate(request: GenerationRequest) -> GenerationResult:
    """Run `request` on its engine; the model is resolved (and prepared if embedded) first.

    Tokenization and the chat template are shared by all engines (transformers' tokenizer, as vLLM
    uses), so two engines given the same request see the same prompt ids and can be compared id by id.
    """
    from transformers import AutoTokenizer

    from workbench.stack.devices import resolve_device

    model_dir = resolve_model(request.model)
    device = resolve_device(request.device, flag="--device")
    dtype = torch_dtype(request.dtype, device, model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    prompt_text = render_prompt(tokenizer, request.prompt, request.chat)
    # The chat template already wrote any special tokens; a plain prompt gets the tokenizer's own (as
    # vLLM's completions endpoint does).
    prompt_ids = tuple(tokenizer(prompt_text, add_special_tokens=not request.chat)["input_ids"])
    if not prompt_ids:
        raise WorkbenchError("--prompt is empty after tokenization; give some text")
    stop_ids = stop_token_ids(model_dir, tokenizer)
    call = EngineCall(model_dir, prompt_ids, stop_ids, device, dtype, request)
    output = ENGINES[request.engine](call)
    ids = output.token_ids
    return GenerationResult(
        model_dir=model_dir,
        engine=request.engine,
        device=str(device),
        dtype=str(dtype).removeprefix("torch."),
        prompt_text=prompt_text,
        prompt_token_ids=prompt_ids,
        token_ids=ids,
        text=tokenizer.decode(list(ids), skip_special_tokens=True),
        finish_reason=FinishReason.STOP if ids and ids[-1] in stop_ids else FinishReason.LENGTH,
        seconds=output.seconds,
    )


def _run_transformers(call: EngineCall) -> EngineOutput:
    import torch
    from transformers import AutoModelForCausalLM

    request = call.request
    model = AutoModelForCausalLM.from_pretrained(call.model_dir, dtype=call.dtype).to(call.device).eval()
    input_ids = torch.tensor([call.prompt_ids], device=call.device)  # [1, prompt_len]
    sampling: dict[str, Any] = {"do_sample": False}
    if request.temperature > 0:
        torch.manual_seed(request.seed)
        sampling = {"do_sample": True, "temperature": request.temperature, "top_k": 0, "top_p": 1.0}
    started = time.perf_counter()
    with torch.inference_mode():
        output = model.generate(
            input_ids,
            attention_mask=torch.ones_like(input_ids),
            max_new_tokens=request.max_tokens,
            eos_token_id=list(call.stop_ids),
            pad_token_id=call.stop_ids[0],
            **sampling,
        )  # [1, prompt_len + generated]
    seconds = time.perf_counter() - started
    return EngineOutput(tuple(int(t) for t in output[0, input_ids.shape[1] :].tolist()), seconds)


def _run_executor(call: EngineCall) -> EngineOutput:
    try:
        from ascend_backend.models import Executor, SamplingParams
    except ImportError as exc:
        raise WorkbenchError(
            f"--engine executor is not available yet: ascend_backend.models cannot be imported ({exc}); "
            "use --engine transformers"
        ) from None
    request = call.request
    executor = Executor.from_pretrained(call.model_dir, device=call.device, dtype=call.dtype)
    params = SamplingParams(max_tokens=request.max_tokens, temperature=request.temperature, seed=request.seed)
    started = time.perf_counter()
    (result,) = executor.generate([list(call.prompt_ids)], params)
    return EngineOutput(tuple(int(t) for t in result.token_ids), time.perf_counter() - started)


ENGINES: MappingProxyType[Engine, Callable[[EngineCall], EngineOutput]] = MappingProxyType(
    {Engine.TRANSFORMERS: _run_transformers, Engine.EXECUTOR: _run_executor}
)


def render_prompt(tokenizer: Any, prompt: str, chat: bool) -> str:
    """`prompt` as is, or as one user turn in the model's chat template with the assistant turn opened."""
    if not chat:
        return prompt
    if not tokenizer.chat_template:
        raise WorkbenchError("--chat: this model's tokenizer has no chat template; drop --chat")
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
    )


def stop_token_ids(model_dir: Path, tokenizer: Any) -> tuple[int, ...]:
    """End-of-sequence ids: generation_config.json's, then config.json's (an int or a list each),
    then the tokenizer's eos; duplicates dropped, order kept."""
    ids: list[Any] = []
    for name in ("generation_config.json", "config.json"):
        path = model_dir / name
        if path.is_file():
            value = json.loads(path.read_text(encoding="utf-8")).get("eos_token_id")
            ids.extend(value if isinstance(value, list) else [value])
    ids.append(tokenizer.eos_token_id)
    found = tuple(dict.fromkeys(int(i) for i in ids if i is not None))
    if not found:
        raise WorkbenchError(f"{model_dir} defines no end-of-sequence token: set eos_token_id in config.json")
    return found


def torch_dtype(name: str, device, model_dir: Path):
    """`--dtype` -> torch.dtype; auto is float32 on CPU and the checkpoint's own dtype elsewhere."""
    import torch

    from workbench.stack.dtypes import parse_dtype

    if name != "auto":
        return parse_dtype(name)
    if device.type == "cpu":
        return torch.float32
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    stored = config.get("dtype") or config.get("torch_dtype") or "bfloat16"
    return getattr(torch, stored, torch.bfloat16)
