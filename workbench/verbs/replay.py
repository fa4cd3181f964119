"""`ascend-workbench replay`: the port's acceptance test — the service's own traffic, judged request by request.

    ascend-workbench replay runs/capture/prod --url http://npu-host:8000
    ascend-workbench replay runs/capture/prod --recipe npu.yaml --speed 2 --limit 500 --out runs/replay/npu
    # the reference against itself first: its noise widens the tie tolerance of the candidate's verdict
    ascend-workbench replay runs/capture/prod --recipe gpu-ref.yaml --out runs/replay/noise
    ascend-workbench replay runs/capture/prod --recipe npu.yaml --noise runs/replay/noise --to-twin gpu-ref.yaml

Requests go at the recorded times (or `--speed` times faster), conversations in order; each answer is saved as
it comes (OUT/requests.jsonl) and a rerun with the same --out resumes. Every request is judged identical,
near_tie, same_tool_call, schema_valid, different or broken (policy/replay/thresholds.yaml), latency per request
class against the recorded with bootstrap intervals, and with --to-twin REFERENCE every `different` request
becomes a twin case with one command (docs/METHOD.md §17, §18).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workbench.verbs._common import (
    add_json_out,
    add_server_source,
    launch_extras,
    lint_recipes,
    terminate_as_interrupt,
    write_json_out,
)

HELP = "replay a captured trace on a service and judge every request against the recorded answer (the acceptance test)"
DESCRIPTION = (
    "Send a trace's requests to --url or a launched --recipe at the recorded timing, keep conversations in order, "
    "and judge each answer against the recorded one: identical, near_tie, same_tool_call, schema_valid, different or "
    "broken; latency per request class with bootstrap intervals and SLO attainment; a verdict; --to-twin hands the "
    "different requests to a twin run."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", type=Path, help="a trace file, or the directory `capture` wrote")
    add_server_source(parser)
    parser.add_argument(
        "--speed", type=float, default=1.0, help="replay this many times faster than recorded (default 1)"
    )
    parser.add_argument("--limit", type=int, help="replay the first N requests")
    parser.add_argument("--out", type=Path, help="run directory (default runs/replay/<stamp>); an existing one resumes")
    parser.add_argument("--model", help="model name to send (default: the target's served model)")
    parser.add_argument("--thresholds", help="replay thresholds file (default policy/replay/thresholds.yaml)")
    parser.add_argument(
        "--noise",
        type=Path,
        metavar="DIR",
        help="a replay of the reference against itself: its drift widens the tolerances",
    )
    parser.add_argument(
        "--to-twin",
        metavar="REFERENCE",
        help="write the different requests as twin prompts and print the twin command against REFERENCE (a URL or recipe)",
    )
    add_json_out(parser, "the replay result (also written to OUT/replay.json)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from workbench.recipes import load_serving_recipe
    from workbench.replay.api import Parity, ReplayRequest, read_trace, run_replay, to_twin

    recipe = load_serving_recipe(args.recipe) if args.recipe else None
    if recipe is not None:
        lint_recipes(args, [recipe])
    extras = launch_extras(args) if recipe is not None else {"extra_env": {}, "extra_args": ()}
    request = ReplayRequest(
        args.trace,
        args.url,
        recipe,
        args.speed,
        args.limit,
        args.out,
        args.model,
        args.thresholds,
        args.noise,
        progress=not args.no_progress,
        **extras,
    )
    with terminate_as_interrupt():  # `kill` stops a launched server like Ctrl-C does; the answers so far stay
        result = run_replay(request)
    print(result.text())
    print(f"written: {result.directory / 'replay.json'}")
    if args.to_twin:
        handoff = to_twin(
            result.verdicts,
            read_trace(args.trace, args.limit),
            result.directory,
            reference=args.to_twin,
            candidate=args.url or args.recipe,
        )
        print(handoff.text() if handoff else "no different request to hand to twin", file=sys.stdout)
    if args.json:
        print(f"written: {write_json_out(args.json, result.to_dict())}")
    return 1 if result.verdict.verdict.value == "error" or result.counts().get(Parity.BROKEN) else 0
