"""`ascend-workbench dump`: per-module outputs for one prompt, from a model or from a serving engine.

# one forward pass of a Hugging Face causal LM (the float32 reference, docs/METHOD.md §8)
ascend-workbench dump --model DIR --prompt "The capital of France is" --out dumps/cpu-fp32
ascend-workbench dump --model DIR --token-ids 1,2,3 --dtype bfloat16 --modules 'model.layers.*' --out D

# the engine under suspicion: start the recipe's vLLM server with dumping on, send the prompt
# (greedy, --steps tokens), stop the server; --reference also captures the transformers float32
# dump of the same tokens, ready for `compare-dumps OUT REFERENCE`
ascend-workbench dump --recipe cpu-tiny --prompt "Hello" --steps 4 --out dumps/engine --reference dumps/golden
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from workbench.errors import WorkbenchError
from workbench.verbs._common import add_launch_options, parse_env_pairs, terminate_as_interrupt

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


HELP = "capture per-module outputs for one prompt: of an HF model (--model) or a vLLM engine (--recipe)"
DESCRIPTION = (
    "--model: run one forward pass of a Hugging Face causal LM and write every selected module's "
    "output. --recipe: start the recipe's vLLM server with the plugin's dump switch on (ASCEND_BACKEND_DUMP, "
    "eager mode), send the prompt greedily for --steps tokens, stop the server and leave the engine's dump "
    "(prefill = step 0, one step per decoded token). Both write safetensors + manifest.json for "
    "`compare-dumps`."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--model", help="Hugging Face model directory (config.json, safetensors)")
    where.add_argument("--recipe", help="serving recipe (file or shipped name): dump from inside its vLLM engine")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="prompt text, tokenized with the model's tokenizer")
    source.add_argument("--token-ids", help="comma-separated prompt token ids, e.g. 1,2,3 (--model only)")
    parser.add_argument("--out", required=True, help="new (or empty) directory to write the dump to")
    parser.add_argument("--stats-only", action="store_true", help="keep Max/Min/Mean/Norm only (big models)")
    parser.add_argument(
        "--modules",
        nargs="+",
        default=["*"],
        metavar="PATTERN",
        help="fnmatch patterns of module names to capture (default: all; the root is '<root>'); with --recipe "
        "they are vLLM's names, e.g. 'model.layers.*' 'logits_processor'",
    )
    parser.add_argument("--dtype", choices=sorted(_DTYPES), help="--model: model dtype (default float32)")
    parser.add_argument("--device", help="--model: torch device, e.g. cpu, cuda, npu:0 (default cpu)")
    engine = parser.add_argument_group("--recipe")
    engine.add_argument("--steps", type=int, default=1, help="forward steps to record = tokens generated (default 1)")
    engine.add_argument("--layers", help="decoder layers to record, e.g. 0,2-3 (default: all)")
    engine.add_argument(
        "--reference",
        metavar="DIR",
        help="also capture the transformers float32 CPU dump of the tokens the engine ran, into DIR",
    )
    add_launch_options(engine)
    parser.set_defaults(handler=run)


def _token_ids(text: str) -> list[int]:
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise WorkbenchError(f"--token-ids {text!r} is not a comma-separated list of integers") from exc
    if not ids:
        raise WorkbenchError("--token-ids is empty; give at least one token id")
    return ids


def run(args: argparse.Namespace) -> int:
    return run_engine_dump(args) if args.recipe else run_model_dump(args)


def run_model_dump(args: argparse.Namespace) -> int:
    from workbench.accuracy.api import capture_dump, load_causal_lm, tokenize_prompt

    for flag, value in (("--steps", args.steps != 1), ("--layers", args.layers), ("--reference", args.reference)):
        if value:
            raise WorkbenchError(f"{flag} belongs to --recipe (a serving engine); with --model use --modules")
    dtype, device = args.dtype or "float32", args.device or "cpu"
    ids = _token_ids(args.token_ids) if args.token_ids is not None else tokenize_prompt(args.model, args.prompt)
    model = load_causal_lm(args.model, _DTYPES[dtype], device)
    input_ids = torch.tensor([ids], dtype=torch.long, device=device)  # [1, S]
    summary = capture_dump(
        model,
        {"input_ids": input_ids, "use_cache": False},
        args.out,
        stats_only=args.stats_only,
        module_patterns=args.modules,
        prompt_token_ids=ids,
        prompt=args.prompt,
        model_description=f"{args.model} ({dtype}, {device})",
    )
    print(
        f"wrote {summary.record_count} tensors from {len(summary.hooked_modules)} modules "
        f"({summary.mode.value}) to {summary.directory}"
    )
    return 0


def _layers(text: str | None) -> list[int] | None:
    if not text:
        return None
    from ascend_backend.vllm_plugin.dump import DumpRequest, DumpSpecError

    try:
        return sorted(DumpRequest.parse(f"dir=.;layers={text}").layers or ())
    except DumpSpecError as exc:
        raise WorkbenchError(f"--layers {text!r}: {exc}") from None


def run_engine_dump(args: argparse.Namespace) -> int:
    from workbench.accuracy.api import capture_engine_dump, capture_reference_for

    for flag, value in (("--token-ids", args.token_ids), ("--dtype", args.dtype), ("--device", args.device)):
        if value:
            raise WorkbenchError(f"{flag} belongs to --model; the recipe sets the engine's dtype and device")
    if args.steps < 1:
        raise WorkbenchError(f"--steps {args.steps}: record at least one forward step (1 = the prefill)")
    with terminate_as_interrupt():  # `kill` stops the launched server like Ctrl-C does
        result = capture_engine_dump(
            args.recipe,
            args.prompt,
            Path(args.out),
            steps=args.steps,
            modules=tuple(args.modules),
            layers=_layers(args.layers),
            stats_only=args.stats_only,
            extra_env=parse_env_pairs(args.env),
            extra_args=tuple(args.server_arg),
            progress=not args.no_progress,
        )
    print(result.describe())
    if args.reference:
        reference = capture_reference_for(result, Path(args.reference))
        print(f"wrote the transformers float32 reference of the same {len(result.token_ids)} tokens to {reference}")
        print(f"compare: ascend-workbench compare-dumps {result.directory} {reference}")
    return 0
