"""The same tiny-model sweep serially, with `--parallel 2` and through a local Ray cluster: wall time and throughput.

    .venv/bin/python benchmarks/bench_parallel_sweep.py [--spec cpu-tiny] [--groups 2] [--rounds 3]

Each mode measures every point of the spec into a fresh directory (so each starts every server):
serial (one server at a time on all cores) once, then `--rounds` rounds of parallel (one server per
device group; on this 2-core machine two groups of one core) and Ray (a local cluster with `--groups`
units of the group resource, started before the clock runs and stopped after each Ray run, so no
parallel run shares the machine with it), in alternating order: the same sweep run twice in a row
differed by 10 s or more here (the second warmer), as much as the difference being measured. Prints
each mode's wall time per round, the ratios parallel / serial (target <= 0.7) and Ray / parallel per
round and their median (target <= 1.1), and the output throughput every point reports in every mode
next to its serial value: on one machine the groups share memory bandwidth and the host CPU (on 2
cores a group is half the machine, so a point measured side by side is expected to report less).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PARALLEL_TARGET = 0.7
RAY_TARGET = 1.1


def _run(spec, out: Path, execution):
    from workbench.sweep import run_sweep

    outcome = run_sweep(spec, out, progress=False, execution=execution)
    failed = [r for r in outcome.results if r.status.value != "ok"]
    if outcome.missing or failed:
        raise SystemExit(f"{execution.mode.value}: {len(outcome.missing)} missing, {len(failed)} failed points")
    return outcome


def _workers_ready(ray, resource: str, groups: int) -> None:
    """Part of starting the cluster: one worker per group up, with the workbench imported (what a sweep
    task imports first), so the Ray run starts as a sweep on an already running cluster (`--ray ADDRESS`)
    does. `ray.init` returns while its workers may still be starting; two runs straight after it measured
    99.6 s and 84.9 s for the same sweep (local parallel: 85.2 s and 80.4 s)."""

    def ready() -> None:
        import workbench.sweep.measure  # noqa: F401

        time.sleep(1.0)  # hold the group so the other probe lands on another worker

    task = ray.remote(ready).options(resources={resource: 1}, num_cpus=0)
    ray.get([task.remote() for _ in range(groups)])


def _breakdown(outcome) -> str:
    """Where a mode's time went, summed over its points: server starts, warm-ups, loads, the rest."""
    sums = {
        key: sum(r.timings.get(key, 0.0) for r in outcome.results) for key in ("server_start_s", "warmup_s", "load_s")
    }
    rest = sum(r.timings.get("wall_s", 0.0) for r in outcome.results) - sum(sums.values())
    return "  ".join(f"{k.removesuffix('_s')} {v:6.1f}" for k, v in sums.items()) + f"  other {rest:6.1f}"


def _throughputs(outcome) -> dict[str, float]:
    return {r.point_id: r.summary["output_throughput"] for r in outcome.results}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="cpu-tiny", help="sweep spec (name or path)")
    parser.add_argument("--groups", type=int, default=2, help="device groups for --parallel and Ray")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of parallel and Ray, in alternating order")
    args = parser.parse_args()

    import ray

    from workbench.sweep import build_report, load_sweep_spec
    from workbench.sweep.ray_executor import CPU_GROUP_RESOURCE, LOCAL_SYSTEM_CONFIG
    from workbench.sweep.runner import Execution

    spec = load_sweep_spec(args.spec)

    def run_on_ray(out: Path):
        """A local cluster with its workers up (reported apart), the sweep on it, the cluster stopped."""
        began = time.monotonic()
        ray.init(
            resources={CPU_GROUP_RESOURCE: args.groups},
            include_dashboard=False,
            logging_level=logging.WARNING,
            _system_config=LOCAL_SYSTEM_CONFIG,
        )
        try:
            _workers_ready(ray, CPU_GROUP_RESOURCE, args.groups)
            started = time.monotonic() - began
            return _run(spec, out, Execution(ray="local", parallel=args.groups)), started
        finally:
            ray.shutdown()

    rounds: list[tuple] = []  # (parallel outcome, Ray outcome, Ray cluster start s)
    with tempfile.TemporaryDirectory(prefix="bench-parallel-sweep-") as tmp:
        root = Path(tmp)
        serial = _run(spec, root / "serial", Execution())
        runs = {"parallel": lambda out: _run(spec, out, Execution(parallel=args.groups)), "ray": run_on_ray}
        for index in range(args.rounds):
            order = list(runs) if index % 2 == 0 else list(reversed(runs))
            done = {mode: runs[mode](root / f"{mode}-{index}") for mode in order}
            parallel, (on_ray, ray_start_s) = done["parallel"], done["ray"]
            rounds.append((parallel, on_ray, ray_start_s))
            print(f"round {index}: parallel {parallel.wall_s:.1f} s, ray {on_ray.wall_s:.1f} s", flush=True)
        labels = build_report(spec, serial.results).points.set_index("point_id")["label"]

    print(
        f"spec {spec.name}: {len(serial.results)} points, {len({r.server_key for r in serial.results})} servers, "
        f"{args.groups} groups, {args.rounds} rounds (parallel first in even rounds, Ray first in odd ones)"
    )
    print(f"{'mode':14s} {'wall_s':>8s} {'/serial':>8s} {'/parallel':>10s}")
    print(f"{'serial':14s} {serial.wall_s:8.1f} {1.0:8.2f}")
    for index, (parallel, on_ray, _) in enumerate(rounds):
        print(f"{f'parallel #{index}':14s} {parallel.wall_s:8.1f} {parallel.wall_s / serial.wall_s:8.2f} {1.0:10.2f}")
        print(
            f"{f'ray #{index}':14s} {on_ray.wall_s:8.1f} {on_ray.wall_s / serial.wall_s:8.2f} "
            f"{on_ray.wall_s / parallel.wall_s:10.2f}"
        )
    print("\nseconds summed over each mode's points (server starts overlap in parallel and Ray):")
    print(f"  {'serial':14s} {_breakdown(serial)}")
    for index, (parallel, on_ray, _) in enumerate(rounds):
        print(f"  {f'parallel #{index}':14s} {_breakdown(parallel)}")
        print(f"  {f'ray #{index}':14s} {_breakdown(on_ray)}")
    starts = [started for _, _, started in rounds]
    print(
        f"(local Ray cluster start with its workers ready, not in the Ray wall times: "
        f"{', '.join(f'{s:.1f}' for s in starts)} s)"
    )
    parallel, on_ray, _ = rounds[0]
    print("\noutput throughput per point, round 0:")
    base, side, remote = _throughputs(serial), _throughputs(parallel), _throughputs(on_ray)
    print(f"\n{'point':40s} {'serial':>8s} {'parallel':>9s} {'ray':>8s} {'par/ser':>8s} {'ray/ser':>8s}  tok/s")
    for point_id, value in base.items():
        print(
            f"{labels[point_id][:40]:40s} {value:8.1f} {side[point_id]:9.1f} {remote[point_id]:8.1f} "
            f"{side[point_id] / value:8.2f} {remote[point_id] / value:8.2f}"
        )

    parallel_ratio = statistics.median(p.wall_s for p, _, _ in rounds) / serial.wall_s
    ray_ratios = [r.wall_s / p.wall_s for p, r, _ in rounds]
    ray_ratio = statistics.median(ray_ratios)
    print(
        f"\nparallel / serial wall (median parallel) = {parallel_ratio:.2f} (target <= {PARALLEL_TARGET}): "
        f"{'met' if parallel_ratio <= PARALLEL_TARGET else 'NOT met'}"
    )
    print(
        f"ray / parallel wall per round {', '.join(f'{x:.2f}' for x in ray_ratios)}; median {ray_ratio:.2f} "
        f"(target <= {RAY_TARGET}): {'met' if ray_ratio <= RAY_TARGET else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
