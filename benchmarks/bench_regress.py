"""How good is the regression gate? False alarms on repeats of a good configuration, and the smallest real
drop it catches, measured on real vLLM servers of the embedded tiny model.

    .venv/bin/python benchmarks/bench_regress.py                 # 5 trials, 3 runs a side, all degradations
    .venv/bin/python benchmarks/bench_regress.py --trials 2 --degradations max_num_seqs=1

1. Baseline: the good configuration (recipes/serving/cpu-tiny), `--repeats` bench runs on a fresh server,
   saved as a baseline in a private data directory (the user's baselines are not touched).
2. False alarms: `--trials` times, a fresh server of the same good configuration, `--repeats` runs,
   `regress` against the baseline. Any finding "regression" on any metric is a false alarm (target 0/5).
3. Drops: each degraded configuration (fewer sequences per batch than requests in flight, or our native
   PyTorch kernels instead of vLLM's C++ ones) on a fresh server, `--repeats` runs, `regress`. Each line
   prints the measured change in output throughput (median against median) and whether the gate flagged
   it: the smallest flagged drop is the gate's resolution on this machine at this noise.

Measured here (1 Dec 2026, cpu-tiny, 2 cores, 3 runs a side): 0 false alarms in 5 trials; the smallest
drop caught was -23.6% (max_num_seqs 6: the TTFT and end-to-end tails); force_native=all -26.4% output
throughput; max_num_seqs 1 -76%.

Every server runs under the recipe's own settings plus the change, so each change is in the provenance
stamp and on the regression line. Ratios are against the baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

DEGRADATIONS = {
    "max_num_seqs=6": {"engine": {"max_num_seqs": 6}},
    "max_num_seqs=4": {"engine": {"max_num_seqs": 4}},
    "max_num_seqs=2": {"engine": {"max_num_seqs": 2}},
    "max_num_seqs=1": {"engine": {"max_num_seqs": 1}},
    "force_native=all": {"env": {"ASCEND_BACKEND_FORCE_NATIVE": "all"}},
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default="cpu-tiny")
    parser.add_argument("--trials", type=int, default=5, help="repeats of the good configuration judged (default 5)")
    parser.add_argument("--repeats", type=int, default=3, help="bench runs per side (default 3)")
    parser.add_argument("--input-len", type=int, default=64)
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument("--num-prompts", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--degradations", nargs="*", default=list(DEGRADATIONS), choices=list(DEGRADATIONS))
    parser.add_argument("--out", type=Path, default=None, help="where the bench JSONs go (default: a temp dir)")
    return parser.parse_args()


class Experiment:
    """The shared pieces: where results go, the workload, the thresholds, and the baseline's name."""

    BASELINE = "good"

    def __init__(self, args: argparse.Namespace) -> None:
        from workbench.recipes import load_serving_recipe
        from workbench.regress.thresholds import load_thresholds
        from workbench.serving.load.workload import Workload

        self.args = args
        self.out = args.out or Path(tempfile.mkdtemp(prefix="bench-regress-"))
        self.recipe = load_serving_recipe(args.recipe)
        self.thresholds = load_thresholds()
        self.good_medians: list[float] = []  # output throughput of each good trial: the same-period reference
        self.workload = Workload(
            input_len=args.input_len,
            output_len=args.output_len,
            num_prompts=args.num_prompts,
            concurrency=args.concurrency,
        )

    def measure(self, label: str, recipe) -> list[Path]:
        """A fresh server of `recipe`, a warm-up, `--repeats` bench runs (one JSON each)."""
        from workbench.regress.measure import measure_repeats

        return measure_repeats(
            recipe,
            self.workload,
            self.args.repeats,
            self.out / label,
            label=label,
            log_dir=self.out / "logs",
            progress=False,
        )

    def judge(self, paths: list[Path]) -> tuple[float, list[str], str, float]:
        """(output-throughput change, metrics flagged as regressions, the throughput finding, its median)."""
        from workbench.regress.regress import regress
        from workbench.regress.results import read_all
        from workbench.regress.store import load_baseline

        baseline = load_baseline(self.BASELINE)
        report = regress(self.BASELINE, baseline.runs, read_all(paths), self.thresholds)
        flagged = [f.metric for _, f in report.regressions if hasattr(f, "metric")]
        throughput = next(f for s in report.series for f in s.metrics if f.metric == "output_throughput")
        return throughput.change, flagged, throughput.finding.value, throughput.current_median


def save_baseline_runs(exp: Experiment) -> None:
    from workbench.regress.results import read_all
    from workbench.regress.store import save_baseline

    paths = exp.measure("baseline", exp.recipe)
    save_baseline(exp.BASELINE, paths)
    values = [r.metrics["output_throughput"] for r in read_all(paths)]
    w = exp.workload
    print(
        f"baseline: {len(values)} runs, output throughput {', '.join(f'{v:.1f}' for v in values)} tok/s "
        f"(median {statistics.median(values):.1f}; workload in={w.input_len} out={w.output_len} "
        f"n={w.num_prompts} c={w.concurrency})"
    )


def false_alarms(exp: Experiment) -> None:
    alarms = 0
    for trial in range(1, exp.args.trials + 1):
        change, flagged, finding, median = exp.judge(exp.measure(f"good-trial{trial}", exp.recipe))
        exp.good_medians.append(median)
        alarms += bool(flagged)
        print(
            f"good trial {trial}: output throughput {100 * change:+.1f}% ({finding}); "
            f"regressions: {', '.join(flagged) or 'none'}"
        )
    print(f"FALSE ALARMS: {alarms}/{exp.args.trials}")


def drops(exp: Experiment) -> None:
    """Each degradation against the baseline (what the gate sees) and against the good trials' median
    (measured in the same period: how large the drop really is while the machine's load drifts)."""
    reference = statistics.median(exp.good_medians) if exp.good_medians else None
    by_throughput: dict[bool, list[tuple[float, str]]] = {True: [], False: []}
    by_gate: dict[bool, list[tuple[float, str]]] = {True: [], False: []}
    for label in exp.args.degradations:
        served = exp.recipe.with_overrides(**DEGRADATIONS[label])
        change, flagged, finding, median = exp.judge(exp.measure(label.replace("=", "-"), served))
        by_throughput["output_throughput" in flagged].append((change, label))
        by_gate[bool(flagged)].append((change, label))
        same_period = f", {100 * (median / reference - 1):+.1f}% against the good trials" if reference else ""
        print(
            f"{label}: output throughput {100 * change:+.1f}% against the baseline ({finding}){same_period}; "
            f"regressions: {', '.join(flagged) or 'none'}"
        )
    for what, found in (("the gate (any metric)", by_gate), ("output throughput", by_throughput)):
        if found[True]:
            change, label = max(found[True])  # the least negative change that was still flagged
            print(f"SMALLEST DROP CAUGHT by {what}: {100 * change:+.1f}% ({label})")
        if found[False]:
            change, label = min(found[False])
            print(f"LARGEST DROP MISSED by {what}: {100 * change:+.1f}% ({label})")


def main() -> None:
    args = parse_args()
    started = time.monotonic()
    exp = Experiment(args)
    os.environ["ASCEND_WORKBENCH_DATA"] = str(exp.out / "data")  # settings reads it at each call: a private store
    save_baseline_runs(exp)
    false_alarms(exp)
    drops(exp)
    print(f"total {time.monotonic() - started:.0f} s; results in {exp.out}")


if __name__ == "__main__":
    main()
