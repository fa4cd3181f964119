"""`ascend-workbench twin`: the same requests on two configurations; where their answers part, or where B's time went.

    # TP=1 against TP=2 of the same recipe (the B side's setting applied to the recipe, validated)
    ascend-workbench twin --recipe cpu-tiny --set B:engine.tensor_parallel_size=2
    # eager against graph mode; a batch of 1 against a batch of 16 on one server; two recipes; two stacks
    ascend-workbench twin --recipe cpu-tiny --set B:engine.enforce_eager=false
    ascend-workbench twin --recipe cpu-tiny --batch 1 16
    ascend-workbench twin --url http://gpu-host:8000 --url http://npu-host:8000 --tokenizer DIR
    # performance: the same load on both sides, profiled, repeated, and the difference attributed
    ascend-workbench twin --perf --recipe cpu-tiny --set B:env.ASCEND_BACKEND_FAULT=silu_and_mul:delay:ms=2
    ascend-workbench twin --perf --url http://gpu-host:8000 --trace gpu.pt.trace.json.gz --recipe npu.yaml
    # performance on the service's own traffic: a replay trace (docs/replay.md) as the load, per request class
    ascend-workbench twin --perf --url http://gpu-host:8000 --url http://npu-host:8000 --prompts traffic/trace.jsonl

Token twin: side A is repeated first (--noise-repeats) to measure its run-to-run noise, the verdict's limits
(policy/twin/thresholds.yaml) are judged against it, and a diverging prompt is dumped on both sides and compared
module by module (--no-locate skips it). Performance twin (--perf): every window runs the load unprofiled, then
profiled in a bounded window (--profile-delay, --profile-steps), on A and B alternately, 1 + --repeats windows a
side; ΔTTFT and ΔTPOT per request class with intervals from the repeats, split into kernel, communication,
host idle, scheduling and queueing (policy/twin/perf.yaml). Its load is --num-prompts requests of the
--input-len classes, or with --prompts a replay trace's first --num-prompts requests: their own bodies, their
recorded output lengths (ignore_eos), the trace's classes (chat, followup, tools, json, completion). Both save as they go: rerun with the same --out to
resume. This verb only turns the flags into a request (`workbench.twin.api`); notebooks 08 and 11 make the same.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

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

HELP = "twin run: the same requests on two configurations; first diverging token and module, or (--perf) where B's time went"
DESCRIPTION = (
    "Send the same prompts (as token ids), greedy, with per-token logprobs, to two configurations of one model "
    "(two recipes, one recipe with --set on a side, two batch sizes, or two URLs); per prompt the first diverging "
    "token and a verdict against the measured run-to-run noise, then the first diverging module. With --perf, send "
    "the same load to both sides instead (synthetic request classes, or a replay trace given as --prompts), profile "
    "each in a bounded window, and split ΔTTFT and ΔTPOT per request class into kernel, communication, host idle, "
    "scheduling and queueing time."
)
LABELS = ("A", "B")
DEFAULT_BATCH = 16


class _Side(argparse.Action):
    """--recipe and --url append to one ordered list, so `--url X --recipe Y` makes X side A; --trace attaches
    a profiler trace to the --url before it."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        sides = list(getattr(namespace, "sides", None) or [])
        if option_string == "--trace":
            if not sides or sides[-1][0] != "url":
                raise argparse.ArgumentError(self, "--trace follows the --url whose service wrote it")
            sides[-1] = (*sides[-1][:2], Path(values))
        else:
            sides.append(("url" if option_string == "--url" else "recipe", values, None))
        namespace.sides = sides


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sides = parser.add_argument_group("sides (A first, then B)")
    sides.add_argument(
        "--recipe",
        action=_Side,
        metavar="RECIPE",
        help="a side launched from a serving recipe (file or shipped name); once: both sides run it",
    )
    sides.add_argument("--url", action=_Side, metavar="URL", help="a side attached to a running server")
    sides.add_argument(
        "--trace",
        action=_Side,
        metavar="PATH",
        help="--perf: the profiler trace the --url before it wrote (a GPU service's .pt.trace.json[.gz])",
    )
    sides.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SIDE:FIELD=VALUE",
        dest="settings",
        help="change one recipe field on one side, e.g. B:engine.tensor_parallel_size=2, B:engine.enforce_eager=false, "
        "B:env.ASCEND_BACKEND_FAULT=silu_and_mul:delay:ms=2 (repeatable)",
    )
    sides.add_argument(
        "--batch",
        type=int,
        nargs="+",
        metavar="N",
        help="token twin: prompts per request, one value for both sides or A then B (e.g. 1 16); default 16",
    )
    _add_token_arguments(parser)
    _add_perf_arguments(parser)
    parser.add_argument("--out", type=Path, help="run directory (default runs/twin/<stamp>); an existing one resumes")
    parser.add_argument("--thresholds", help="verdict thresholds file (default policy/twin/thresholds.yaml, perf.yaml)")
    add_json_out(parser, "the twin result (also written to OUT/twin.json or OUT/perf-twin.json)")
    add_launch_options(parser)
    parser.set_defaults(handler=run, sides=None)


def _add_token_arguments(parser: argparse.ArgumentParser) -> None:
    work = parser.add_argument_group("token twin")
    work.add_argument(
        "--prompts",
        help="data set (text, humaneval) or a JSONL file, as evaluate (default text); --perf: a replay trace "
        "(docs/replay.md) whose requests are the load, in the trace's request classes",
    )
    work.add_argument(
        "--num-prompts",
        type=int,
        help="the first N prompts (default: all); --perf: requests a window (default 16, with a trace all of it)",
    )
    work.add_argument("--max-tokens", type=int, default=32, help="greedy tokens per prompt (ignore_eos; default 32)")
    work.add_argument("--top-logprobs", type=int, default=5, help="runners-up per position (1-20; default 5)")
    work.add_argument("--seed", type=int, default=0, help="request seed (default 0)")
    work.add_argument("--noise-repeats", type=int, default=1, help="repeats of side A for the noise (0 = none)")
    work.add_argument("--tokenizer", type=Path, help="tokenizer directory, for servers without /tokenize")
    work.add_argument("--no-locate", action="store_true", help="stop after the token comparison")
    work.add_argument("--locate-prompt", type=int, metavar="N", help="dump and compare this prompt even if it agreed")
    work.add_argument("--locate-steps", type=int, metavar="K", help="with --locate-prompt: engine steps to dump")


def _add_perf_arguments(parser: argparse.ArgumentParser) -> None:
    from workbench.twin.api import PerfWorkload, ProfileWindow

    load, window = PerfWorkload(), ProfileWindow()
    perf = parser.add_argument_group("performance twin (--perf)")
    perf.add_argument("--perf", action="store_true", help="compare latency, not answers: where B's time went")
    perf.add_argument(
        "--input-len",
        type=int,
        nargs="+",
        metavar="N",
        help=f"prompt lengths, one request class each (default {' '.join(map(str, load.input_lens))}; "
        "not with a --prompts trace, whose lengths are recorded)",
    )
    perf.add_argument(
        "--output-len",
        type=int,
        help=f"output tokens per request (default {load.output_len}; a --prompts trace decodes its recorded lengths)",
    )
    perf.add_argument("--concurrency", type=int, default=load.concurrency, help="requests in flight")
    perf.add_argument("--warmup", type=int, default=load.warmup_requests, help="requests before the first window")
    perf.add_argument("--repeats", type=int, default=2, help="extra windows per side: the noise (default 2)")
    perf.add_argument(
        "--profile-delay", type=int, default=window.delay_steps, help="engine steps before the profiler records"
    )
    perf.add_argument("--profile-steps", type=int, default=window.max_steps, help="engine steps the profiler records")


def parse_setting(text: str) -> tuple[str, str, Any]:
    """'B:engine.enforce_eager=false' -> ('B', 'engine.enforce_eager', False); the value is YAML."""
    side, sep, rest = text.partition(":")
    field, eq, value = rest.partition("=")
    if not sep or side.upper() not in LABELS or not eq or not field.strip():
        raise WorkbenchError(
            f"--set {text!r}: write SIDE:FIELD=VALUE with SIDE A or B, e.g. --set B:engine.tensor_parallel_size=2 "
            "or --set B:env.ASCEND_BACKEND_FAULT=silu_and_mul:scale:factor=1.1"
        )
    try:
        parsed = yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError:
        parsed = value
    return side.upper(), field.strip(), parsed


def make_sides(args: argparse.Namespace):
    """The two typed sides from --recipe / --url / --trace (in order), --set and --batch."""
    from workbench.twin.api import Side

    sources = list(args.sides or [])
    if not 1 <= len(sources) <= 2:
        raise WorkbenchError(
            f"a twin run has two sides; give --recipe/--url once (both sides run it) or twice, not {len(sources)} times"
        )
    settings = [parse_setting(text) for text in args.settings]
    if args.perf and args.batch:
        raise WorkbenchError("--batch is the token twin's; the performance twin's load is set by --concurrency")
    batch = args.batch or [1 if args.perf else DEFAULT_BATCH]
    if len(sources) == 1:
        if sources[0][0] == "url" and not settings and len(set(batch)) <= 1 and not args.perf:
            raise WorkbenchError("one --url for both sides compares a server with itself; vary --batch, or give two")
        sources = [sources[0], sources[0]]
    if len(batch) not in (1, 2):
        raise WorkbenchError(f"--batch takes one value (both sides) or two (A then B), got {len(batch)}")
    batches = batch * 2 if len(batch) == 1 else batch
    sides = []
    for label, (kind, value, trace), batch in zip(LABELS, sources, batches, strict=True):
        changes = {field: v for side, field, v in settings if side == label}
        if kind == "url":
            if changes:
                raise WorkbenchError(f"--set {label}:...: side {label} is a URL; settings apply to recipes only")
            sides.append(Side.of_url(label, value, batch=batch, trace=trace))
        else:
            sides.append(Side.of_recipe(label, load_serving_recipe(value), changes, batch=batch))
    return sides[0], sides[1]


def token_request(args: argparse.Namespace):
    from workbench.twin.api import TwinRequest, TwinSettings

    side_a, side_b = make_sides(args)
    return TwinRequest(
        side_a,
        side_b,
        prompts=args.prompts or "text",
        num_prompts=args.num_prompts,
        settings=TwinSettings(args.max_tokens, args.top_logprobs, args.seed, args.noise_repeats),
        thresholds=args.thresholds,
        tokenizer=args.tokenizer,
        out=args.out,
        locate=not args.no_locate,
        locate_prompt=args.locate_prompt,
        locate_steps=args.locate_steps,
        extra_env=tuple(parse_env_pairs(args.env).items()),
        extra_args=tuple(args.server_arg),
    )


def perf_workload(args: argparse.Namespace):
    """The performance twin's load: a replay trace given as --prompts, else the --input-len classes."""
    from workbench.twin.api import PerfWorkload

    if args.prompts is None:
        default = PerfWorkload()
        return PerfWorkload(
            input_lens=tuple(args.input_len or default.input_lens),
            output_len=args.output_len if args.output_len is not None else default.output_len,
            num_prompts=args.num_prompts or default.num_prompts,
            concurrency=args.concurrency,
            warmup_requests=args.warmup,
            seed=args.seed,
        )
    if args.input_len is not None or args.output_len is not None:
        raise WorkbenchError(
            f"--prompts {args.prompts} sets the lengths (each request's recorded ones): leave out --input-len and "
            "--output-len, or leave out --prompts for the synthetic load"
        )
    return PerfWorkload.of_trace(args.prompts, args.num_prompts, args.concurrency, args.warmup, args.seed)


def perf_request(args: argparse.Namespace):
    from workbench.twin.api import PerfTwinRequest, ProfileWindow

    side_a, side_b = make_sides(args)
    workload = perf_workload(args)
    return PerfTwinRequest(
        side_a,
        side_b,
        workload=workload,
        window=ProfileWindow(args.profile_delay, args.profile_steps),
        repeats=args.repeats,
        thresholds=args.thresholds,
        tokenizer=args.tokenizer,
        out=args.out,
        extra_env=tuple(parse_env_pairs(args.env).items()),
        extra_args=tuple(args.server_arg),
    )


def run(args: argparse.Namespace) -> int:
    from workbench.twin.api import run_perf_twin, run_twin

    if not args.sides:
        raise WorkbenchError("give the sides: --recipe R (both sides) or two of --recipe / --url")
    request = perf_request(args) if args.perf else token_request(args)
    with terminate_as_interrupt():  # `kill` stops a launched server like Ctrl-C does; the logs stay
        if args.perf:
            result = run_perf_twin(request, progress=not args.no_progress)
            written = result.directory / "perf-twin.json"
            failed = False
        else:
            result = run_twin(request, progress=not args.no_progress)
            written = result.directory / "twin.json"
            failed = result.verdict.verdict is Verdict.ERROR
    print(result.text())
    print(f"written: {written}")
    if args.json:
        print(f"written: {write_json_out(args.json, result.to_dict())}")
    return 1 if failed else 0
