"""`ascend-workbench quantize`: a float checkpoint -> a W8A8 checkpoint that vllm-ascend or vLLM serves.

    ascend-workbench quantize --model smollm2 --scheme w8a8-static --format compressed-tensors --out runs/sm-w8a8
    ascend-workbench quantize --model /ckpt --scheme w8a8-dynamic --format msmodelslim --out /ckpt-w8a8
    ascend-workbench quantize --model smollm2 --scheme w8a8-static --format msmodelslim --out o \
        --calibration humaneval --num-samples 64 --keep-float '*.down_proj'

The autopilot (`--auto`) finds which layers to keep in float for an accuracy budget, on the served
engine (or the executor), and proves the plan on a held-out split:

    ascend-workbench quantize --model smollm2 --auto --budget 1 [--json] [--out DIR --format msmodelslim]
    ascend-workbench quantize --model tiny --auto --budget 0.5 --evaluator executor --target float-greedy

`msmodelslim` is Ascend's layout (`quant_model_description.json`; vllm-ascend `--quantization ascend`),
`compressed-tensors` vLLM's (served by vLLM's int8 kernels, on this machine's CPU too). Static W8A8
calibrates activation ranges on `--calibration` (a data-set name of `evaluate`, or a JSONL file;
default: the calibration set kept apart from what `evaluate` scores); dynamic W8A8 needs none.
The work is `workbench.quantize`'s; this module maps flags to a request.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.verbs._common import add_json_print, add_no_progress

HELP = "make a W8A8 checkpoint (msmodelslim or compressed-tensors), or find a plan for a budget (--auto)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="tiny, smollm2, or a float Hugging Face checkpoint directory")
    parser.add_argument(
        "--scheme",
        choices=["w8a8-static", "w8a8-dynamic"],
        help="static: per-tensor activation scale from calibration; dynamic: a scale per token (not with --auto)",
    )
    parser.add_argument(
        "--format",
        choices=["msmodelslim", "compressed-tensors"],
        help="msmodelslim (vllm-ascend) or compressed-tensors (vLLM int8 kernels); --auto: of --out",
    )
    parser.add_argument("--out", type=Path, help="directory to write (must be new or empty); optional with --auto")
    parser.add_argument(
        "--calibration",
        default="calibration",
        help="data set (calibration, humaneval, text) or a JSONL file; static scheme only",
    )
    parser.add_argument("--num-samples", type=int, default=32, help="calibration samples (default 32; --auto 16)")
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
    auto = parser.add_argument_group("autopilot (--auto)")
    auto.add_argument("--auto", action="store_true", help="search the layers to keep in float for --budget")
    auto.add_argument("--budget", type=float, default=1.0, help="allowed NLL rise over float, percent (default 1)")
    auto.add_argument(
        "--evaluator",
        default="served",
        choices=["served", "executor"],
        help="where plans are measured: a vLLM server (default) or the backend's executor",
    )
    auto.add_argument("--recipe", help="the float model's serving recipe (default for tiny/smollm2: cpu-<model>)")
    auto.add_argument(
        "--ladder",
        help="rungs per unit, cheapest first, FLOAT last (default served: "
        "W8A8_DYNAMIC,FLOAT; executor: W8A8,W8A8_DYNAMIC,FLOAT)",
    )
    auto.add_argument(
        "--proxy",
        help="sensitivity proxy that orders the search (default: kurtosis, chosen from the agreement table in the README)",
    )
    auto.add_argument("--dataset", action="append", metavar="NAME", help="data sets to score (default humaneval, text)")
    auto.add_argument("--limit", type=int, default=24, help="problems per data set, half dev half test (default 24)")
    auto.add_argument(
        "--target",
        default="reference",
        choices=["reference", "float-greedy"],
        help="score the references, or the float model's own greedy continuations",
    )
    auto.add_argument("--max-float", type=int, help="most units kept in float (default: the policy's share)")
    auto.add_argument("--group-size", type=int, default=32, help="group size of the 4-bit rungs (default 32)")
    auto.add_argument("--state-dir", type=Path, help="where measurements are kept; a rerun resumes there")
    auto.add_argument("--policy", help="autopilot policy file (default policy/quantize/autopilot.yaml)")
    add_json_print(auto, "the plan (scheme per module, the modules kept in float, every step)")
    add_no_progress(auto)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.auto:
        return run_auto(args)
    missing = [flag for flag in ("scheme", "format", "out") if getattr(args, flag) is None]
    if missing:
        raise WorkbenchError(f"quantize needs --{', --'.join(missing)} (or --auto to search a plan for --budget)")
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


def run_auto(args: argparse.Namespace) -> int:
    from workbench.quantize.api import AutoRequest, Outcome, Target, parse_format, parse_ladder, run_autopilot

    if args.scheme or args.keep_float:
        raise WorkbenchError(
            "--auto chooses the schemes and the float layers itself: drop --scheme/--keep-float "
            "(use --ladder to limit the schemes)"
        )
    if args.out is not None and args.out.exists() and any(args.out.iterdir()) and not args.force:
        raise WorkbenchError(f"--out {args.out} exists and is not empty; choose a new directory or pass --force")
    options = {"ladder": parse_ladder(args.ladder)} if args.ladder else {}
    if args.proxy:
        options["proxy"] = args.proxy
    if args.dataset:
        options["datasets"] = tuple(args.dataset)
    request = AutoRequest(
        model=args.model,
        budget=args.budget,
        evaluator=args.evaluator,
        recipe=args.recipe,
        limit=args.limit,
        target=Target(args.target),
        max_float=args.max_float,
        state_dir=args.state_dir,
        out=args.out,
        format=parse_format(args.format or "compressed-tensors"),
        policy=args.policy,
        calibration_samples=16 if args.num_samples == 32 else args.num_samples,
        group_size=args.group_size,
        **options,
    )

    def say(line: str) -> None:  # the steps as they happen, on stderr (stdout keeps the plan / --json)
        print(line, file=sys.stderr, flush=True)

    result = run_autopilot(request, progress=not (args.no_progress or args.json), say=say)
    print(json.dumps(result.to_dict(), indent=1) if args.json else result.text())
    return 0 if result.outcome is Outcome.HOLDS else 1
