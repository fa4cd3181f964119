"""`ascend-workbench run`: execute every notebook headless (the main job)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from workbench.errors import WorkbenchError

HELP = "execute all notebooks headless (papermill) into runs/notebooks/<UTC stamp>/ with HTML and index.html"
DESCRIPTION = (
    "Execute the guided notebooks with their default parameters (the embedded default: tiny model, CPU), "
    "two at a time on two cores, longest first by the last run's times. Writes executed notebooks, HTML, "
    "index.html and summary.json; exits 1 if any cell fails."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--notebooks", type=Path, default=None, help="notebook directory (default: notebooks/)")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="runs root; the report goes to ROOT/notebooks/<UTC timestamp>/ (default: the project's runs/ or $ASCEND_WORKBENCH_RUNS)",
    )
    parser.add_argument("--only", action="append", default=[], help="run only notebooks whose name contains this")
    parser.add_argument(
        "-p",
        "--parameter",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a notebook parameter (YAML value), applied to every notebook that declares it",
    )
    parser.add_argument("--kernel", default="python3", help="Jupyter kernel name (default python3)")
    parser.add_argument(
        "--cell-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop a cell that runs longer and fail its notebook (default 1800; 0 = no limit)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="notebooks at once, each in its own kernel (default 2 on two cores or more, else 1)",
    )
    parser.set_defaults(handler=handle)


def _parse_parameters(items: list[str]) -> dict[str, object]:
    params = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise WorkbenchError(f"--parameter {item!r}: expected NAME=VALUE, e.g. -p dtype=float16")
        params[name.strip()] = yaml.safe_load(value)
    return params


def handle(args: argparse.Namespace) -> int:
    from workbench.run.api import DEFAULT_CELL_TIMEOUT_S, RunRequest, run_main_job

    timeout = DEFAULT_CELL_TIMEOUT_S if args.cell_timeout is None else (args.cell_timeout or None)
    if timeout is not None and timeout < 0:
        raise WorkbenchError(f"--cell-timeout {args.cell_timeout:g}: give a number of seconds, or 0 for no limit")
    jobs = {} if args.jobs is None else {"jobs": args.jobs}
    request = RunRequest(
        args.notebooks, args.out, tuple(args.only), _parse_parameters(args.parameter), args.kernel, timeout, **jobs
    )
    report = run_main_job(
        request, on_start=lambda paths, run_dir: print(f"running {len(paths)} notebook(s) into {run_dir}")
    )
    for o in report.outcomes:
        status = "ok" if o.ok else f"FAILED at cell {o.failed_cell}: {o.error}"
        print(f"  {o.notebook:40s} {o.seconds:7.1f} s  {status}")
    print(f"report: {report.run_dir / 'index.html'}")
    if not report.ok:
        names = ", ".join(f"{o.notebook} (cell {o.failed_cell})" for o in report.failures())
        print(f"failed: {names}", file=sys.stderr)
        return 1
    return 0
