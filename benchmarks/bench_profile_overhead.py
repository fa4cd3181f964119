"""What profiling costs when it is not recording: profiler off vs configured but outside the window.

    .venv/bin/python benchmarks/bench_profile_overhead.py [--recipe cpu-tiny] [--pairs 2]

Both arms run the same recipe and the same fixed workload; the "configured" arm's server gets exactly
what `ascend-workbench profile` gives it (`--profiler-config` with the torch profiler, no Python stacks,
and VLLM_CUSTOM_SCOPES_FOR_PROFILING=1 so vLLM's host phases are marked) but no /start_profile is ever
sent: this is the price of leaving a server ready to be profiled. Servers alternate (off, on, on, off,
...) so a drift of the shared machine's load hits both arms alike; each server gets a warm-up and then
`--runs` measured loads. Prints each load's output throughput and the median ratio configured / off.

Target: >= 0.97.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TARGET = 0.97


def measure(recipe, configured: bool, workload, runs: int, trace_dir: Path) -> list[float]:
    from workbench.profiling.capture import SCOPES_ENV, profiler_args
    from workbench.serving.client import model_dir
    from workbench.serving.loadgen import build_prompts, load_tokenizer, run_coroutine, run_load_async
    from workbench.serving.server import launch

    args = profiler_args(trace_dir) if configured else ()
    env = dict(SCOPES_ENV) if configured else {}
    with launch(recipe, extra_env=env, extra_args=args, progress=False) as server:
        tokenizer = load_tokenizer(model_dir(server.url, server.model))
        prompts = build_prompts(tokenizer, workload.num_prompts, workload.input_len, seed=workload.seed)
        run_coroutine(run_load_async(server.url, server.model, prompts[:8], workload, progress=False))  # warm-up
        results = []
        for _ in range(runs):
            result = run_coroutine(run_load_async(server.url, server.model, prompts, workload, progress=False))
            assert result.summary.failed == 0, result.records[0].error
            results.append(result.summary.output_throughput)
    assert not any(trace_dir.iterdir()), "the configured server wrote traces without a window"
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="cpu-tiny")
    parser.add_argument("--pairs", type=int, default=2, help="servers per arm (alternating)")
    parser.add_argument("--runs", type=int, default=3, help="measured loads per server")
    parser.add_argument("--num-prompts", type=int, default=64)
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()

    from workbench.recipes import load_serving_recipe
    from workbench.serving.loadgen import Workload

    recipe = load_serving_recipe(args.recipe)
    workload = Workload(
        input_len=args.input_len, output_len=args.output_len, num_prompts=args.num_prompts, concurrency=args.concurrency
    )
    arms: dict[str, list[float]] = {"off": [], "configured": []}
    began = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        for pair in range(args.pairs):
            order = ("off", "configured") if pair % 2 == 0 else ("configured", "off")
            for arm in order:
                trace_dir = Path(tmp) / f"{arm}-{pair}"
                trace_dir.mkdir()
                values = measure(recipe, arm == "configured", workload, args.runs, trace_dir)
                arms[arm] += values
                print(f"pair {pair} {arm:>10}: " + ", ".join(f"{v:.1f}" for v in values) + " output tok/s", flush=True)
    off, on = statistics.median(arms["off"]), statistics.median(arms["configured"])
    ratio = on / off
    print(
        f"\nworkload: {args.num_prompts} prompts x {args.input_len} -> {args.output_len} tokens, "
        f"concurrency {args.concurrency}; recipe {recipe.name}; {time.monotonic() - began:.0f} s"
    )
    print(f"median output throughput: off {off:.1f} tok/s, configured (outside the window) {on:.1f} tok/s")
    print(f"ratio configured / off: {ratio:.3f}  (target >= {TARGET}: {'met' if ratio >= TARGET else 'MISSED'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
