"""The same tiny-model sweep serially, with `--parallel 2` and on a Ray cluster: wall time and throughput.

    .venv/bin/python benchmarks/bench_parallel_sweep.py [--spec cpu-tiny] [--groups 2] [--rounds 3]
        [--modes serial,parallel,ray]

Every sweep runs in a fresh Python process, as `ascend-workbench sweep` does, so no mode starts with
another mode's imports already done (transformers alone is ~10 s of CPU here), and each measures every
point into a fresh directory (so each starts every server). Each of `--rounds` rounds runs serial (one
server at a time on all cores), parallel (one server per device group; on this 2-core machine two
groups of one core) and Ray back to back, in an order rotated from round to round, and the ratios are
taken within a round: this machine is a virtual one on a shared host, whose speed was seen to halve
for minutes at a time (the same sweep took 37 s in one round and 88 s two rounds later), so a mode
measured once and compared with runs made minutes later says more about the host than about the mode.
`--modes parallel,ray` leaves serial out, so that one sitting holds twice the rounds for the Ray ratio
(a round of all three takes 4-5 minutes here, and one round's Ray / parallel ratio spread 0.94-1.33).
For each Ray run a cluster is started on this machine with `ray start --head` offering `--groups` units
of the group resource, with the system config `--ray local` uses (workers at the raylet's priority; not
timed: a sweep on Ascend connects to a cluster that is already up), the sweep connects with `--ray
auto`, and the cluster is stopped again before the next run, so no other run shares the machine with it.

Every point must have run at this process's niceness, or the run stops: modes measured at different CPU
priorities are not comparable. Prints each mode's wall time per round (the sweep's own, connecting to
Ray included; and the whole process), the ratios parallel / serial (target <= 0.7) and Ray / parallel
per round with their medians (target <= 1.1), a host-speed probe taken before each run, where each
mode's time went, and the output throughput
every point reports in every mode next to its serial value: on one machine the groups share memory
bandwidth and the host CPU (on 2 cores a group is half the machine, so a point measured side by side is
expected to report less).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if __name__ == "__main__":
    sys.path.insert(0, str(REPO))

PARALLEL_TARGET = 0.7
RAY_TARGET = 1.1
TIMINGS = ("server_start_s", "prompts_s", "warmup_s", "load_s")
PROBE_LOOP = 2_000_000
MODES = ("serial", "parallel", "ray")

# What `ascend-workbench sweep --spec S --out D [--parallel N] [--ray auto]` does, less the report.
SWEEP = """
import json, sys, time
began = time.monotonic()
from workbench.sweep.spec import load_sweep_spec
from workbench.sweep.runner import run_sweep
from workbench.sweep.runner import Execution
spec, out, mode, groups = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
execution = {"serial": Execution(), "parallel": Execution(parallel=groups),
             "ray": Execution(ray="auto", parallel=groups)}[mode]
outcome = run_sweep(load_sweep_spec(spec), out, progress=False, execution=execution)
bad = [r.point_id for r in outcome.results if r.status.value != "ok"]
print(json.dumps({"sweep_s": outcome.wall_s, "missing": len(outcome.missing), "failed": bad}))
"""


@dataclass(frozen=True)
class Run:
    mode: str
    sweep_s: float  # run_sweep's own wall time (for Ray: connecting to the cluster included)
    process_s: float  # the whole fresh process: interpreter, imports, sweep
    probe_s: float  # the host-speed probe just before the run
    results: tuple


def _speed_probe() -> float:
    """Seconds for a fixed pure-Python loop on one core: the host's speed right now (see the module
    docstring for why it drifts)."""
    began = time.perf_counter()
    sum(i * i for i in range(PROBE_LOOP))
    return time.perf_counter() - began


def _sweep(spec: str, out: Path, mode: str, groups: int) -> Run:
    from workbench.sweep.runner import RESULTS_FILE
    from workbench.sweep.store import ResultStore

    probe_s = _speed_probe()
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", SWEEP, spec, str(out), mode, str(groups)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    process_s = time.monotonic() - began
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        raise SystemExit(f"{mode} sweep into {out} failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    facts = json.loads(lines[-1])
    if facts["missing"] or facts["failed"]:
        raise SystemExit(f"{mode}: {facts['missing']} missing, failed points {facts['failed']} (logs in {out})")
    results = tuple(ResultStore(out / RESULTS_FILE).read())
    lowered = sorted({r.placement.get("niceness") for r in results} - {os.nice(0)}, key=str)
    if lowered:  # a mode whose servers ran at another priority is not comparable
        raise SystemExit(f"{mode}: servers ran at niceness {lowered}, this benchmark at {os.nice(0)} (logs in {out})")
    return Run(mode, facts["sweep_s"], process_s, probe_s, results)


def _ray(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    return subprocess.run(
        [sys.executable, "-m", "ray.scripts.scripts", *args], env=env, capture_output=True, text=True, timeout=600
    )


@contextlib.contextmanager
def ray_head(groups: int) -> Iterator[float]:
    """A Ray head node on this machine offering `groups` CPU groups; yields its start time; stops it.

    `ray stop` stops every Ray process on the machine, not only this head: run the benchmark with no
    other Ray cluster (a test session's, say) on it."""
    from workbench.serving.server import free_port
    from workbench.sweep.ray_executor import CPU_GROUP_RESOURCE, LOCAL_SYSTEM_CONFIG

    port = free_port()
    began = time.monotonic()
    started = _ray(
        "start",
        "--head",
        f"--port={port}",
        f"--resources={json.dumps({CPU_GROUP_RESOURCE: groups})}",
        "--include-dashboard=false",
        "--disable-usage-stats",
        f"--system-config={json.dumps(LOCAL_SYSTEM_CONFIG)}",
    )
    if started.returncode:
        raise SystemExit(f"ray start failed:\n{started.stderr[-3000:]}")
    try:
        yield time.monotonic() - began
    finally:
        stopped = _ray("stop")
        if stopped.returncode:
            print(f"ray stop exit {stopped.returncode}: {stopped.stderr[-1000:]}", file=sys.stderr)


def _breakdown(run: Run) -> str:
    """Where a mode's time went, summed over its points: server starts, prompts, warm-ups, loads, the rest."""
    sums = {key: sum(r.timings.get(key, 0.0) for r in run.results) for key in TIMINGS}
    rest = sum(r.timings.get("wall_s", 0.0) for r in run.results) - sum(sums.values())
    return "  ".join(f"{k.removesuffix('_s')} {v:6.1f}" for k, v in sums.items()) + f"  other {rest:6.1f}"


def _throughputs(run: Run) -> dict[str, float]:
    return {r.point_id: r.summary["output_throughput"] for r in run.results}


@dataclass(frozen=True)
class Round:
    runs: dict[str, Run]  # mode -> its run, in the order they ran
    cluster_s: float | None  # `ray start --head` before the Ray run (not in its wall time)

    def ratio(self, mode: str, base: str) -> float:
        return self.runs[mode].sweep_s / self.runs[base].sweep_s


def _round(spec: str, root: Path, index: int, groups: int, modes: tuple[str, ...]) -> Round:
    """Each mode once, back to back, in an order rotated by `index` (so no mode always runs first, or
    always right after Ray's cluster was stopped)."""
    order = modes[index % len(modes) :] + modes[: index % len(modes)]
    runs: dict[str, Run] = {}
    cluster_s = None
    for mode in order:
        if mode != "ray":
            runs[mode] = _sweep(spec, root / f"{mode}-{index}", mode, groups)
            continue
        with ray_head(groups) as head_s:
            cluster_s = head_s
            runs[mode] = _sweep(spec, root / f"ray-{index}", "ray", groups)
    return Round(runs, cluster_s)


def _ratio_line(name: str, ratios: list[float], target: float) -> str:
    median = statistics.median(ratios)
    return (
        f"{name} per round {', '.join(f'{x:.2f}' for x in ratios)}; median {median:.2f} "
        f"(target <= {target}): {'met' if median <= target else 'NOT met'}"
    )


def _modes(text: str) -> tuple[str, ...]:
    modes = tuple(m.strip() for m in text.split(",") if m.strip())
    unknown = sorted(set(modes) - set(MODES))
    if unknown or len(set(modes)) != len(modes) or "parallel" not in modes or len(modes) < 2:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give parallel and at least one of serial, ray, once each (e.g. parallel,ray)"
        )
    return tuple(m for m in MODES if m in modes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="cpu-tiny", help="sweep spec (name or path)")
    parser.add_argument("--groups", type=int, default=2, help="device groups for --parallel and Ray")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the modes, in rotated order")
    parser.add_argument(
        "--modes", type=_modes, default=MODES, help="modes each round runs: parallel and serial and/or ray"
    )
    args = parser.parse_args()

    from workbench.sweep.report import build_report
    from workbench.sweep.spec import load_sweep_spec

    spec = load_sweep_spec(args.spec)
    rounds: list[Round] = []
    with tempfile.TemporaryDirectory(prefix="bench-parallel-sweep-") as tmp:
        for index in range(args.rounds):
            done = _round(args.spec, Path(tmp), index, args.groups, args.modes)
            rounds.append(done)
            runs = ", ".join(f"{mode} {run.sweep_s:.1f} s" for mode, run in done.runs.items())
            print(f"round {index}: {runs}", flush=True)
        first = rounds[0].runs["parallel"].results
        labels = build_report(spec, first).points.set_index("point_id")["label"]

    print(
        f"\nspec {spec.name}: {len(first)} points, {len({r.server_key for r in first})} servers, "
        f"{args.groups} groups, {args.rounds} rounds of {', '.join(args.modes)} (in rotated order); every "
        "sweep in a fresh process"
    )
    print("(probe_s: the host-speed probe before the run; lower is faster)")
    print(f"{'mode':14s} {'sweep_s':>8s} {'process_s':>10s} {'/serial':>8s} {'/parallel':>10s} {'probe_s':>8s}")
    for index, done in enumerate(rounds):
        for mode, run in done.runs.items():  # in the order they ran
            per_serial = f"{done.ratio(mode, 'serial'):.2f}" if "serial" in done.runs else ""
            per_parallel = f"{done.ratio(mode, 'parallel'):.2f}" if mode == "ray" else ""
            print(
                f"{f'{mode} #{index}':14s} {run.sweep_s:8.1f} {run.process_s:10.1f} {per_serial:>8s} "
                f"{per_parallel:>10s} {run.probe_s:8.3f}"
            )
    print("\nseconds summed over each mode's points (server starts overlap in parallel and Ray):")
    for index, done in enumerate(rounds):
        for mode, run in done.runs.items():
            print(f"  {f'{mode} #{index}':14s} {_breakdown(run)}")
    if "ray" in args.modes:
        starts = ", ".join(f"{done.cluster_s:.1f}" for done in rounds)
        print(f"(`ray start --head` before each Ray run, not in its wall time: {starts} s)")
    base = "serial" if "serial" in args.modes else "parallel"
    others = [m for m in args.modes if m != base]
    throughputs = {mode: _throughputs(run) for mode, run in rounds[0].runs.items()}
    print("\noutput throughput per point (tok/s), round 0:")
    print(
        f"\n{'point':40s} "
        + " ".join(f"{m:>9s}" for m in (base, *others))
        + "".join(f" {f'{m[:3]}/{base[:3]}':>8s}" for m in others)
    )
    for point_id, value in throughputs[base].items():
        print(
            f"{labels[point_id][:40]:40s} {value:9.1f}"
            + "".join(f" {throughputs[m][point_id]:9.1f}" for m in others)
            + "".join(f" {throughputs[m][point_id] / value:8.2f}" for m in others)
        )

    print()
    if "serial" in args.modes:
        ratios = [d.ratio("parallel", "serial") for d in rounds]
        print(_ratio_line("parallel / serial wall", ratios, PARALLEL_TARGET))
    if "ray" in args.modes:
        print(_ratio_line("ray / parallel wall", [d.ratio("ray", "parallel") for d in rounds], RAY_TARGET))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
