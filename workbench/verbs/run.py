"""`ascend-workbench run`: execute every notebook headless (the main job)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from workbench import settings
from workbench.errors import WorkbenchError

HELP = "execute all notebooks headless (papermill) into runs/notebooks/<UTC stamp>/ with HTML and index.html"
DESCRIPTION = (
    "Execute the guided notebooks in order with their default parameters (the embedded "
    "default: tiny model, CPU). Writes executed notebooks, HTML and index.html; exits 1 if any cell fails."
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
    from workbench.run.api import discover, run_notebooks

    notebooks = discover(args.notebooks or settings.notebooks_dir(), args.only)
    run_dir = settings.run_dir("notebooks", fresh=True, root=args.out)
    print(f"running {len(notebooks)} notebook(s) into {run_dir}")
    from workbench.run.api import DEFAULT_CELL_TIMEOUT_S

    timeout = DEFAULT_CELL_TIMEOUT_S if args.cell_timeout is None else (args.cell_timeout or None)
    if timeout is not None and timeout < 0:
        raise WorkbenchError(f"--cell-timeout {args.cell_timeout:g}: give a number of seconds, or 0 for no limit")
    report = run_notebooks(
        notebooks,
        run_dir,
        _parse_parameters(args.parameter),
        args.kernel,
        cwd=settings.REPO_ROOT,
        cell_timeout_s=timeout,
    )
    for o in report.outcomes:
        status = "ok" if o.ok else f"FAILED at cell {o.failed_cell}: {o.error}"
        print(f"  {o.notebook:40s} {o.seconds:7.1f} s  {status}")
    print(f"report: {run_dir / 'index.html'}")
    if not report.ok:
        names = ", ".join(f"{o.notebook} (cell {o.failed_cell})" for o in report.failures())
        print(f"failed: {names}", file=sys.stderr)
        return 1
    return 0
