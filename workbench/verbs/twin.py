"""`ascend-workbench twin`: the same greedy requests on two configurations; first diverging token, then module.

    # TP=1 against TP=2 of the same recipe (the B side's setting applied to the recipe, validated)
    ascend-workbench twin --recipe cpu-tiny --set B:engine.tensor_parallel_size=2
    # eager against graph mode; a batch of 1 against a batch of 16 on one server; two recipes; two stacks
    ascend-workbench twin --recipe cpu-tiny --set B:engine.enforce_eager=false
    ascend-workbench twin --recipe cpu-tiny --batch 1 16
    ascend-workbench twin --recipe gpu-ref.yaml --recipe npu.yaml --prompts humaneval --num-prompts 32
    ascend-workbench twin --url http://gpu-host:8000 --url http://npu-host:8000 --tokenizer DIR

Side A is repeated first (--noise-repeats) to measure the configuration's own run-to-run noise; every
limit of the verdict (policy/twin/thresholds.yaml, --thresholds) is judged against it. Generations are
saved per side as they come (OUT/A.jsonl, OUT/B.jsonl): rerun the same command with the same --out to
resume a killed run. When a prompt diverged and both sides are recipes, both are dumped at the diverging
step and compared module by module (tensor-parallel shards gathered): the first diverging module, its op
and a single-op repro script (--no-locate skips it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.recipes import load_serving_recipe
from workbench.results.verdict import Verdict
from workbench.verbs._common import (
    add_json_out,
    add_launch_options,
    parse_env_pairs,
    terminate_as_interrupt,
    write_json_out,
)

HELP = (
    "twin run: the same greedy requests on two configurations; first diverging token, then the first diverging module"
)
DESCRIPTION = (
    "Send the same prompts (as token ids), greedy, with per-token logprobs, to two configurations of one model "
    "(two recipes, one recipe with --set on a side, two batch sizes, or two URLs); per prompt the first diverging "
    "token, both tokens, the logprob gap and whether it is a near tie; a verdict against the measured run-to-run "
    "noise; then, for the first diverging prompt, both engines dumped at that step and compared module by module."
)


class _Side(argparse.Action):
    """--recipe and --url append to one ordered list, so `--url X --recipe Y` makes X side A."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        sides = list(getattr(namespace, "sides", None) or [])
        sides.append(("url" if option_string == "--url" else "recipe", values))
        namespace.sides = sides


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sides = parser.add_argument_group("sides (A first, then B)")
    sides.add_argument("--recipe", action=_Side, metavar="RECIPE",
                       help="a side launched from a serving recipe (file or shipped name); once: both sides run it")  # fmt: skip
    sides.add_argument("--url", action=_Side, metavar="URL", help="a side attached to a running server")
    sides.add_argument(
        "--set", action="append", default=[], metavar="SIDE:FIELD=VALUE", dest="settings",
        help="change one recipe field on one side, e.g. B:engine.tensor_parallel_size=2, B:engine.enforce_eager=false, "
        "B:env.ASCEND_BACKEND_FAULT=silu_and_mul:scale:factor=1.1 (repeatable)",
    )  # fmt: skip
    sides.add_argument("--batch", type=int, nargs="+", default=[16], metavar="N",
                       help="prompts per request: one value for both sides, or A then B (e.g. 1 16); default 16")  # fmt: skip
    work = parser.add_argument_group("requests")
    work.add_argument(
        "--prompts", default="text", help="data set (text, humaneval) or a JSONL file, as evaluate --dataset"
    )
    work.add_argument("--num-prompts", type=int, help="the first N prompts (default: all)")
    work.add_argument("--max-tokens", type=int, default=32, help="greedy tokens per prompt (ignore_eos; default 32)")
    work.add_argument("--top-logprobs", type=int, default=5, help="runners-up per position (1-20; default 5)")
    work.add_argument("--seed", type=int, default=0, help="request seed (default 0)")
    work.add_argument(
        "--noise-repeats", type=int, default=1, help="repeats of side A for the noise (default 1; 0 = none)"
    )
    work.add_argument("--tokenizer", type=Path, help="tokenizer directory, for servers without /tokenize")
    judge = parser.add_argument_group("verdict and module stage")
    judge.add_argument("--thresholds", help="twin thresholds file (default policy/twin/thresholds.yaml)")
    judge.add_argument("--no-locate", action="store_true", help="stop after the token comparison")
    judge.add_argument("--locate-prompt", type=int, metavar="N", help="dump and compare this prompt even if it agreed")
    judge.add_argument("--locate-steps", type=int, metavar="K", help="with --locate-prompt: engine steps to dump")
    parser.add_argument("--out", type=Path, help="run directory (default runs/twin/<stamp>); an existing one resumes")
    add_json_out(parser, "the twin result (also written to OUT/twin.json)")
    add_launch_options(parser)
    parser.set_defaults(handler=run, sides=None)


def run(args: argparse.Namespace) -> int:
    from workbench.twin.api import TwinSettings, locate, make_sides, run_twin, wants_locate

    if not args.sides:
        raise WorkbenchError("give the sides: --recipe R (both sides) or two of --recipe / --url")
    if args.locate_steps is not None and args.locate_prompt is None:
        raise WorkbenchError("--locate-steps goes with --locate-prompt N (the prompt to dump)")
    side_a, side_b = make_sides(args.sides, load_serving_recipe, settings=args.settings, batches=args.batch)
    settings = TwinSettings(args.max_tokens, args.top_logprobs, args.seed, args.noise_repeats)
    extra_env, extra_args = parse_env_pairs(args.env), tuple(args.server_arg)
    with terminate_as_interrupt():  # `kill` stops a launched server like Ctrl-C does; the logs stay
        result = run_twin(
            side_a, side_b, args.prompts, out=args.out, num_prompts=args.num_prompts, settings=settings,
            thresholds=args.thresholds, tokenizer=args.tokenizer, extra_env=extra_env, extra_args=extra_args,
            progress=not args.no_progress,
        )  # fmt: skip
        print(result.text())
        wanted = args.locate_prompt is not None or (result.first_divergence(near_ties=True) is not None
                                                    and not args.no_locate)  # fmt: skip
        if wanted and wants_locate(result, args.locate_prompt):
            located = locate(result, prompt=args.locate_prompt, steps=args.locate_steps, extra_env=extra_env,
                             extra_args=extra_args, progress=not args.no_progress)  # fmt: skip
            print(located.text())
            result = _with_locate(result, located)
        elif wanted:
            print(
                "module stage skipped: a side is a URL; dump it where it runs (`ascend-workbench dump`)",
                file=sys.stderr,
            )
    print(f"written: {result.directory / 'twin.json'}")
    if args.json:
        print(f"written: {write_json_out(args.json, result.to_dict())}")
    return 1 if result.verdict.verdict is Verdict.ERROR else 0


def _with_locate(result, located):
    from dataclasses import replace

    updated = replace(result, locate=located.to_dict())
    updated.write()
    return updated
