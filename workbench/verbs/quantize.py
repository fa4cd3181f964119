"""`ascend-workbench quantize`: a float checkpoint -> a W8A8 checkpoint that vllm-ascend or vLLM serves.

    ascend-workbench quantize --model smollm2 --scheme w8a8-static --format compressed-tensors --out runs/sm-w8a8
    ascend-workbench quantize --model /ckpt --scheme w8a8-dynamic --format msmodelslim --out /ckpt-w8a8
    ascend-workbench quantize --model smollm2 --scheme w8a8-static --format msmodelslim --out o \
        --calibration humaneval --num-samples 64 --keep-float '*.down_proj'

`msmodelslim` is Ascend's layout (`quant_model_description.json`; vllm-ascend `--quantization ascend`),
`compressed-tensors` vLLM's (served by vLLM's int8 kernels, on this machine's CPU too). Static W8A8
calibrates activation ranges on `--calibration` (a data-set name of `evaluate`, or a JSONL file;
default: the calibration set kept apart from what `evaluate` scores); dynamic W8A8 needs none.
The work is `workbench.quantize`'s; this module maps flags to a request.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "make a W8A8 checkpoint (msmodelslim or compressed-tensors)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="tiny, smollm2, or a float Hugging Face checkpoint directory")
    parser.add_argument(
        "--scheme",
        required=True,
        choices=["w8a8-static", "w8a8-dynamic"],
        help="static: per-tensor activation scale from calibration; dynamic: a scale per token",
    )
    parser.add_argument(
        "--format",
        required=True,
        choices=["msmodelslim", "compressed-tensors"],
        help="msmodelslim (vllm-ascend) or compressed-tensors (vLLM int8 kernels)",
    )
    parser.add_argument("--out", required=True, type=Path, help="directory to write (must be new or empty)")
    parser.add_argument(
        "--calibration",
        default="calibration",
        help="data set (calibration, humaneval, text) or a JSONL file; static scheme only",
    )
    parser.add_argument("--num-samples", type=int, default=32, help="calibration samples (default 32)")
    parser.add_argument("--max-tokens", type=int, default=512, help="tokens per calibration sample (default 512)")
    parser.add_argument(
        "--dtype",
        default="auto",
        choices=["auto", "bfloat16", "float16"],
        help="float dtype of the checkpoint (auto: the source's; bf16 for an fp32 source)",
    )
    parser.add_argument(
        "--keep-float",
        action="append",
        default=[],
        metavar="GLOB",
        help="leave matching linear layers unquantized, e.g. '*.down_proj' (repeatable)",
    )
    parser.add_argument("--force", action="store_true", help="replace a non-empty --out")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from workbench.quantize.api import QuantizeRequest, Scheme, parse_format, quantize_checkpoint

    request = QuantizeRequest(
        model=args.model,
        scheme=Scheme.parse(args.scheme),
        format=parse_format(args.format),
        out=args.out,
        calibration=args.calibration,
        num_samples=args.num_samples,
        dtype=args.dtype,
        keep_float=tuple(args.keep_float),
        max_tokens=args.max_tokens,
        force=args.force,
    )
    print(quantize_checkpoint(request).summary())
    return 0
