"""`ascend-workbench sweep`: run a tuning sweep from a spec, resumably, and write an HTML report.

    ascend-workbench sweep --spec recipes/sweeps/cpu-tiny.yaml [--out DIR] [--adaptive]

Results go to DIR/results.jsonl (one line per point, appended as each finishes) and the report to
DIR/report.html. Rerunning the same command measures only the points that are missing, so an
interrupted sweep (Ctrl-C, SIGKILL, reboot) loses nothing already measured.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.settings import run_dir


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="tuning sweep over engine arguments: Pareto fronts, best under SLO, diagnosis, HTML report",
        description="Start a vLLM server per configuration of a sweep spec (recipes/sweeps/*.yaml), run its "
        "workloads, scrape /metrics, and store each point as it finishes; rerun to resume.",
    )
    parser.add_argument("--spec", required=True, help="sweep spec: a path or a shipped name such as cpu-tiny")
    parser.add_argument("--out", type=Path, help="output directory (default: runs/sweeps/<spec name>)")
    parser.add_argument("--adaptive", action="store_true",
                        help="auto_tune-style search from the spec's 'adaptive:' section instead of the grid")
    parser.add_argument("--report-only", action="store_true", help="do not measure; rebuild report.html from DIR")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars (CI logs)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from workbench.sweep import ResultStore, build_report, load_sweep_spec, run_adaptive, run_sweep, write_html
    from workbench.sweep.analysis import overhead_table

    spec = load_sweep_spec(args.spec)
    out = args.out or run_dir("sweeps", spec.name)
    missing = 0
    if args.adaptive:
        outcome = run_adaptive(spec, out, progress=not args.no_progress)
        print(outcome.summary())
    elif not args.report_only:
        result = run_sweep(spec, out, progress=not args.no_progress)
        missing = len(result.missing)
        print(f"sweep {spec.name}: {len(result.measured)} measured, {len(result.skipped)} already stored, "
              f"{missing} missing; {result.wall_s:.0f} s")
    results = ResultStore(out / "results.jsonl").read()
    report = build_report(spec, results)
    print(report.points_table().round(2).to_string(index=False))
    print(report.diagnosis_table().to_string(index=False, max_colwidth=70))
    print(overhead_table(report.points.assign(point_id=report.points["label"])).round(2).to_string(index=False))
    print(report.best_text())
    path = write_html(report, out / "report.html")
    print(f"results: {out / 'results.jsonl'}\nreport:  {path}")
    return 1 if missing else 0
