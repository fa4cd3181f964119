"""`ascend-workbench profile`: where the time goes — capture a profile on a recipe's server, or read one.

    ascend-workbench profile --recipe cpu-tiny --out runs/profiles/tiny [--json OUT]
    ascend-workbench profile --recipe cpu-tiny --tensor-parallel-size 2
    ascend-workbench profile --recipe cpu-tiny --graph-mode        # also eager vs compiled, fixed and mixed lengths
    ascend-workbench profile PATH [--json OUT]                     # torch_npu / msprof / msprof-analyze / torch traces
    ascend-workbench profile PATH --ai-cores 24 --vector-cores 48  # ... with block dims judged against the chip

Prints the time shares per rank (with what they mean on this device), the verdicts with evidence and
fix (docs/METHOD.md §12), the top ops and the host phases. On Ascend output it also judges every hot kernel
of kernel_details.csv / op_summary_*.csv from its pipeline counters, and explains the device's idle time from
trace_view.json's host links (free_analysis's causes). A capture never leaves its server running.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.profiling.api import (
    CaptureWorkload,
    capture,
    format_report,
    judge,
    load_thresholds,
    measure_eager_and_compiled,
    read_profile,
    write_json,
)
from workbench.recipes import load_serving_recipe
from workbench.settings import run_dir
from workbench.stack.provenance import provenance
from workbench.verbs._common import add_json_out, add_no_progress, parse_env_pairs, terminate_as_interrupt

HELP = "time shares (compute / communication / free), verdicts and top ops from a capture or a profile directory"
DESCRIPTION = (
    "With --recipe: start the recipe's vLLM server with its profiler configured, profile a fixed "
    "workload between /start_profile and /stop_profile, stop the server and analyse the traces. With PATH: "
    "analyse an existing torch_npu (*_ascend_pt), msprof (mindstudio_profiler_output), msprof-analyze "
    "(cluster_step_trace_time.csv) or torch.profiler (*.pt.trace.json[.gz]) output."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", type=Path, help="an existing profile directory or trace file to analyse")
    parser.add_argument("--recipe", help="capture: a serving recipe (file or shipped name, e.g. cpu-tiny)")
    parser.add_argument(
        "--out", type=Path, help="capture: where traces and profile.json go (default runs/profiles/<recipe>-<time>)"
    )
    add_json_out(parser, "the profile, verdicts and provenance")
    parser.add_argument("--tensor-parallel-size", type=int, help="capture: override the recipe's tensor_parallel_size")
    workload = parser.add_argument_group("workload (capture)")
    default = CaptureWorkload()
    workload.add_argument("--input-len", type=int, default=default.input_len, help="prompt tokens per request (exact)")
    workload.add_argument("--output-len", type=int, default=default.output_len, help="output tokens per request")
    workload.add_argument("--num-prompts", type=int, default=default.num_prompts, help="requests inside the window")
    workload.add_argument("--concurrency", type=int, default=default.concurrency, help="requests in flight")
    workload.add_argument("--warmup", type=int, default=default.warmup_requests, help="requests before the window")
    parser.add_argument(
        "--graph-mode",
        action="store_true",
        help="capture: also measure eager against compiled on fixed and mixed lengths",
    )
    parser.add_argument("--repeats", type=int, default=3, help="--graph-mode: measured runs per mode and workload")
    parser.add_argument("--thresholds", type=Path, help="verdict thresholds (default policy/profiling/thresholds.yaml)")
    parser.add_argument("--top", type=int, default=10, help="how many ops to list")
    parser.add_argument("--ai-cores", type=int, help="PATH: the chip's AI (cube) cores, to judge block dims")
    parser.add_argument("--vector-cores", type=int, help="PATH: the chip's vector cores, to judge block dims")
    parser.add_argument("--env", action="append", metavar="KEY=VALUE", help="extra environment for the server")
    add_no_progress(parser)
    parser.set_defaults(handler=run)


def _analyse(args: argparse.Namespace):
    profile = read_profile(args.path)
    stamp = {
        "provenance": provenance(),
        "analysed_here": "the stamp is the analysing machine's; the capture's "
        "own stack is not recorded in the profile files",
    }
    return replace(profile, meta={**profile.meta, **stamp})


def _capture(args: argparse.Namespace):
    recipe = load_serving_recipe(args.recipe)
    if args.tensor_parallel_size:
        recipe = recipe.with_overrides(engine={"tensor_parallel_size": args.tensor_parallel_size})
    workload = CaptureWorkload(args.input_len, args.output_len, args.num_prompts, args.concurrency, args.warmup)
    out = args.out or run_dir("profiles", recipe.name, fresh=True)
    env = parse_env_pairs(args.env)
    with terminate_as_interrupt():
        result = capture(recipe, out, workload, extra_env=env, progress=not args.no_progress)
        print(
            f"captured {len(result.profile.ranks)} rank(s) in {result.trace_dir}; load inside the window: "
            f"{result.load.summary.output_throughput:.1f} output tok/s, {result.load.summary.failed} failed"
        )
        if args.graph_mode:
            measured = measure_eager_and_compiled(
                recipe, repeats=args.repeats, extra_env=env, log_dir=Path(out), progress=not args.no_progress
            )
            print("graph mode (output tok/s, median of runs):")
            print(measured.ratios().round(3).to_string(index=False))
            print("\n".join(f"  {line}" for line in measured.conclusion()))
    return result.profile


def _kernels_and_idle(path: Path, args: argparse.Namespace) -> str:
    """Kernel verdicts of every counter table and idle causes of every timeline with host links under `path`."""
    from workbench.profiling.api import (
        CoreCounts,
        idle_causes,
        idle_causes_frame,
        kernel_verdicts,
        kernel_verdicts_frame,
    )

    cores = CoreCounts(args.ai_cores, args.vector_cores) if args.ai_cores else None
    root = path if path.is_dir() else path.parent
    lines = []
    for table in sorted([*root.rglob("kernel_details.csv"), *root.rglob("op_summary_*.csv")]):
        shown = kernel_verdicts_frame(kernel_verdicts(table, cores))[
            ["kernel", "core", "calls", "total_ms", "verdicts"]
        ]
        lines += ["", f"kernel verdicts ({table}):", shown.to_string(index=False)]
    for timeline in sorted(root.rglob("trace_view.json")):
        try:
            causes = idle_causes(timeline)
        except WorkbenchError as exc:  # a timeline without host links says so and the rest is kept
            lines += ["", f"idle causes ({timeline}): {exc}"]
            continue
        shown = idle_causes_frame(causes)[["rank", "cause", "gaps", "total_ms", "share", "example"]]
        lines += ["", f"idle causes ({timeline}):", shown.to_string(index=False)]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if (args.path is None) == (args.recipe is None):
        raise WorkbenchError("give exactly one of PATH (analyse an existing profile) or --recipe R (capture one)")
    if args.path is not None and args.graph_mode:
        raise WorkbenchError("--graph-mode needs --recipe: it starts the recipe's server in eager and compiled mode")
    profile = _analyse(args) if args.path is not None else _capture(args)
    verdicts = judge(profile, load_thresholds(args.thresholds))
    print(format_report(profile, verdicts, args.top))
    if args.path is not None:
        print(_kernels_and_idle(Path(args.path), args))
    if args.json:
        print(f"written: {write_json(profile, verdicts, args.json)}")
    return 0
