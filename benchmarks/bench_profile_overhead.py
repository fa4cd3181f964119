"""What profiling costs when it is not recording: profiler off vs configured but outside the window.

    .venv/bin/python benchmarks/bench_profile_overhead.py [--recipe cpu-tiny] [--rounds 6]

Both arms run the same recipe and the same fixed workload; the "configured" server gets exactly what
`ascend-workbench profile` gives it (`--profiler-config` with the torch profiler, no Python stacks, and
VLLM_CUSTOM_SCOPES_FOR_PROFILING=1 so vLLM's host phases are marked) but no /start_profile is ever
sent: the price of leaving a server ready to be profiled. Both servers run side by side (one is idle
while the other is measured) and the loads alternate between them, first one then the other, the order
swapped every round, so a drift of the shared machine's load hits both arms alike. Each server first
serves the whole workload once (allocations, and a compile for every batch size it will meet). Prints
each round's throughputs and the median of the per-round ratios configured / off.

Target: >= 0.97.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TARGET = 0.97


def _server(stack: contextlib.ExitStack, recipe, configured: bool, trace_dir: Path):
    from workbench.profiling.capture import SCOPES_ENV, profiler_args
    from workbench.serving.server import launch

    args = profiler_args(trace_dir) if configured else ()
    return stack.enter_context(
        launch(recipe, extra_env=dict(SCOPES_ENV) if configured else {}, extra_args=args, progress=False)
    )


def _load(server, prompts, workload) -> float:
    from workbench.serving.load.runner import run_coroutine, run_load_async

    result = run_coroutine(run_load_async(server.url, server.model, prompts, workload, progress=False))
    assert result.summary.failed == 0, result.records[0].error
    return result.summary.output_throughput


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="cpu-tiny")
    parser.add_argument("--rounds", type=int, default=6, help="measured loads per arm (alternating)")
    parser.add_argument("--num-prompts", type=int, default=64)
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()

    from workbench.profiling.capture import server_tokenizer
    from workbench.recipes import load_serving_recipe
    from workbench.serving.load.workload import Workload, build_prompts

    recipe = load_serving_recipe(args.recipe)
    workload = Workload(
        input_len=args.input_len, output_len=args.output_len, num_prompts=args.num_prompts, concurrency=args.concurrency
    )
    began = time.monotonic()
    ratios, arms = [], {"off": [], "configured": []}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        trace_dir = Path(tmp) / "traces"
        trace_dir.mkdir()
        servers = {
            "off": _server(stack, recipe, False, trace_dir),
            "configured": _server(stack, recipe, True, trace_dir),
        }
        prompts = build_prompts(server_tokenizer(servers["off"]), args.num_prompts, args.input_len, seed=0)
        for server in servers.values():
            _load(server, prompts, workload)  # warm-up: the whole workload once
        for round_ in range(args.rounds):
            order = ("off", "configured") if round_ % 2 == 0 else ("configured", "off")
            measured = {arm: _load(servers[arm], prompts, workload) for arm in order}
            for arm, value in measured.items():
                arms[arm].append(value)
            ratios.append(measured["configured"] / measured["off"])
            print(
                f"round {round_} ({order[0]} first): off {measured['off']:.1f}, configured "
                f"{measured['configured']:.1f} output tok/s, ratio {ratios[-1]:.3f}",
                flush=True,
            )
        assert not any(trace_dir.iterdir()), "the configured server wrote traces without a window"
    ratio = statistics.median(ratios)
    print(
        f"\nworkload: {args.num_prompts} prompts x {args.input_len} -> {args.output_len} tokens, "
        f"concurrency {args.concurrency}; recipe {recipe.name}; {time.monotonic() - began:.0f} s"
    )
    print(
        f"median output throughput: off {statistics.median(arms['off']):.1f} tok/s, configured (outside the "
        f"window) {statistics.median(arms['configured']):.1f} tok/s"
    )
    print(
        f"median per-round ratio configured / off: {ratio:.3f}  (target >= {TARGET}: "
        f"{'met' if ratio >= TARGET else 'MISSED'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
