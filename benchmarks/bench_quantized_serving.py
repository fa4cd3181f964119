"""Served throughput of the W8A8 SmolLM2 against the bf16 one, on the same workload and server settings.

    .venv/bin/python benchmarks/bench_quantized_serving.py                     # 1 pair, 32 prompts 128 -> 64
    .venv/bin/python benchmarks/bench_quantized_serving.py --pairs 3 --concurrency 16

The two recipes differ only in the model: `cpu-smollm2` (bf16) and `cpu-smollm2-w8a8` (int8 weights,
per-token int8 activations, compressed-tensors; vLLM's CPU int8 kernels). Each round starts one server,
warms it up, runs the workload with the workbench's load generator (`vllm bench serve`'s definitions),
and stops it; the two servers alternate which goes first from pair to pair, so a drift in the machine's
background load hits both alike. Reported: output tokens/s, mean TTFT and TPOT per server, and the
W8A8/bf16 throughput ratio per pair and as a geometric mean.
"""

from __future__ import annotations

import argparse
import math

from workbench.recipes import load_serving_recipe
from workbench.serving.load.runner import run_load
from workbench.serving.load.workload import Workload
from workbench.serving.server import launch

RECIPES = ("cpu-smollm2", "cpu-smollm2-w8a8")


def measure(recipe_name: str, workload: Workload, warmup: Workload) -> dict[str, float]:
    return measure_recipe(load_serving_recipe(recipe_name), workload, warmup)


def measure_recipe(recipe, workload: Workload, warmup: Workload) -> dict[str, float]:
    """One fresh server of `recipe`: warm-up, then the workload; output tok/s, mean TTFT and TPOT."""
    recipe_name = recipe.name
    with launch(recipe, progress=False, pooled=False) as server:
        run_load(server.url, server.model, warmup, progress=False)
        summary = run_load(server.url, server.model, workload, progress=False).summary
    if summary.failed:
        raise SystemExit(f"{recipe_name}: {summary.failed} requests failed - not a throughput measurement")
    return {
        "output_tok_s": summary.output_throughput,
        "mean_ttft_ms": summary.ttft_ms["mean"],
        "mean_tpot_ms": summary.tpot_ms["mean"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=1)
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--num-prompts", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    workload = Workload(args.input_len, args.output_len, num_prompts=args.num_prompts, concurrency=args.concurrency)
    warmup = Workload(args.input_len, 8, num_prompts=4, concurrency=4)
    ratios = []
    for pair in range(args.pairs):
        order = RECIPES if pair % 2 == 0 else RECIPES[::-1]
        results = {name: measure(name, workload, warmup) for name in order}
        for name in RECIPES:
            r = results[name]
            print(
                f"pair {pair}: {name:18s} {r['output_tok_s']:8.1f} tok/s  TTFT {r['mean_ttft_ms']:8.1f} ms  "
                f"TPOT {r['mean_tpot_ms']:7.1f} ms",
                flush=True,
            )
        ratio = results[RECIPES[1]]["output_tok_s"] / results[RECIPES[0]]["output_tok_s"]
        ratios.append(ratio)
        print(f"pair {pair}: W8A8 / bf16 output throughput = {ratio:.3f}", flush=True)
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(
        f"W8A8 / bf16 output throughput, geometric mean over {len(ratios)} pair(s): {geo:.3f} "
        f"({args.num_prompts} prompts {args.input_len} -> {args.output_len}, concurrency {args.concurrency})"
    )


if __name__ == "__main__":
    main()
