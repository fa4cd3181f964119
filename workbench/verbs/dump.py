"""`ascend-workbench dump`: capture per-module outputs of a Hugging Face causal LM for one prompt.

ascend-workbench dump --model DIR --prompt "The capital of France is" --out dumps/cpu-fp32
ascend-workbench dump --model DIR --token-ids 1,2,3 --dtype bfloat16 --modules 'model.layers.*' --out D
"""

from __future__ import annotations

import argparse

import torch

from workbench.errors import WorkbenchError

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "dump",
        help="capture per-module outputs of an HF model for one prompt into a dump directory",
        description="Run one forward pass of a Hugging Face causal LM and write every selected module's "
        "output (safetensors + manifest.json) for `compare-dumps`.",
    )
    parser.add_argument("--model", required=True, help="Hugging Face model directory (config.json, safetensors)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="prompt text, tokenized with the model's tokenizer")
    source.add_argument("--token-ids", help="comma-separated prompt token ids, e.g. 1,2,3")
    parser.add_argument("--out", required=True, help="new (or empty) directory to write the dump to")
    parser.add_argument("--stats-only", action="store_true", help="keep Max/Min/Mean/Norm only (big models)")
    parser.add_argument(
        "--modules", nargs="+", default=["*"], metavar="PATTERN",
        help="fnmatch patterns of module names to capture (default: all; the root is '<root>')",
    )  # fmt: skip
    parser.add_argument("--dtype", choices=sorted(_DTYPES), default="float32", help="model dtype (default float32)")
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cpu, cuda, npu:0 (default cpu)")
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
    from workbench.accuracy.dump import capture_dump, load_causal_lm, tokenize_prompt

    ids = _token_ids(args.token_ids) if args.token_ids is not None else tokenize_prompt(args.model, args.prompt)
    model = load_causal_lm(args.model, _DTYPES[args.dtype], args.device)
    input_ids = torch.tensor([ids], dtype=torch.long, device=args.device)  # [1, S]
    summary = capture_dump(
        model,
        {"input_ids": input_ids, "use_cache": False},
        args.out,
        stats_only=args.stats_only,
        module_patterns=args.modules,
        prompt_token_ids=ids,
        prompt=args.prompt,
        model_description=f"{args.model} ({args.dtype}, {args.device})",
    )
    print(
        f"wrote {summary.record_count} tensors from {len(summary.hooked_modules)} modules "
        f"({summary.mode.value}) to {summary.directory}"
    )
    return 0
