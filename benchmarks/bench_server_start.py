"""Server start and served throughput: the model worker inside vLLM's EngineCore vs in a worker process.

    .venv/bin/python benchmarks/bench_server_start.py                      # tiny and smollm2, 2 rounds
    .venv/bin/python benchmarks/bench_server_start.py --recipes cpu-tiny --rounds 3

Why: TP=1 CPU servers now run their worker in the EngineCore (VLLM_ENABLE_V1_MULTIPROCESSING=0, workbench.serving.server)
because a server start is most of the main job's and the suite's time. This measures what that buys —
seconds from launch to a healthy /health — and checks what it could cost: output throughput of the same
fixed load (the workbench's load generator, `vllm bench serve`'s definitions), since the API server and
the engine's scheduling and the model then share one Python process.

Each round starts one server per mode for each recipe, the two modes in alternating order from round to
round (this host's speed drifts by more than the effect; see README), warms it up, runs the load, stops
it. Reported per recipe: the median ready time and throughput of each mode, and the medians of the
per-round ratios in-process / worker process.
"""

from __future__ import annotations

import argparse
import statistics

from workbench.recipes import load_serving_recipe
from workbench.serving.load.runner import run_load
from workbench.serving.load.workload import Workload
from workbench.serving.server import IN_PROCESS_WORKER_VAR, launch

MODES = {"in-process": "0", "worker-process": "1"}


def measure(recipe_name: str, mode: str, workload: Workload, warmup: Workload) -> dict[str, float]:
    recipe = load_serving_recipe(recipe_name)
    with launch(recipe, extra_env={IN_PROCESS_WORKER_VAR: MODES[mode]}, progress=False, pooled=False) as server:
        run_load(server.url, server.model, warmup, progress=False)
        summary = run_load(server.url, server.model, workload, progress=False).summary
        ready_s = server.ready_s
    if summary.failed:
        raise SystemExit(f"{recipe_name} {mode}: {summary.failed} requests failed - not a measurement")
    return {"ready_s": ready_s, "output_tok_s": summary.output_throughput}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipes", default="cpu-tiny,cpu-smollm2", help="comma-separated serving recipes")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--num-prompts", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--input-len", type=int, default=256)
    parser.add_argument("--output-len", type=int, default=64)
    args = parser.parse_args()
    workload = Workload(args.input_len, args.output_len, num_prompts=args.num_prompts, concurrency=args.concurrency)
    warmup = Workload(args.input_len, 8, num_prompts=4, concurrency=4)
    for recipe in args.recipes.split(","):
        rounds = []
        for index in range(args.rounds):
            order = list(MODES) if index % 2 == 0 else list(reversed(MODES))
            found = {mode: measure(recipe, mode, workload, warmup) for mode in order}
            rounds.append(found)
            print(
                f"{recipe} round {index} ({' then '.join(order)}): "
                + "; ".join(f"{m} ready {v['ready_s']:.1f} s, {v['output_tok_s']:.1f} tok/s" for m, v in found.items()),
                flush=True,
            )
        for key, label in (("ready_s", "ready time"), ("output_tok_s", "output throughput")):
            inside = statistics.median(r["in-process"][key] for r in rounds)
            apart = statistics.median(r["worker-process"][key] for r in rounds)
            ratio = statistics.median(r["in-process"][key] / r["worker-process"][key] for r in rounds)
            print(f"{recipe} {label}: in-process {inside:.1f}, worker process {apart:.1f}; ratio {ratio:.3f}")


if __name__ == "__main__":
    main()
