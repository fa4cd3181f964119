"""`ascend-workbench scan PATH...`: what in a service's code ties it to CUDA, and what replaces it on Ascend.

Static: the code is parsed and read, never imported or run. Prints a summary grouped by severity,
category, rule and file; `--json` / `--csv` write every finding (with provenance). Exit 0 when the
scan ran (findings are the expected outcome, not a failure), 2 on a user error (a path that does not
exist, a bad mapping file), 130 when interrupted (what was scanned is still written).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.verbs._common import add_json_out, add_no_progress

HELP = "static scan of a service's code for CUDA dependencies, each mapped to its Ascend counterpart"
DESCRIPTION = (
    "Scan directories or files (Python by AST; shell, YAML/JSON/TOML, requirements and lock "
    "files, Dockerfiles, CMake, C/C++ and .cu sources by line rules) for what ties them to CUDA. Each "
    "finding carries its Ascend counterpart, a severity (works under transfer_to_npu / needs a change / "
    "blocks / unknown) and the workbench step that verifies it, from policy/scan/cuda-mapping.yaml. "
    "Findings are ranked by where they run: the engine container's files first, then what ships with it, "
    "then build, CI, tests and lock files; Helm templates (.tpl) and Terraform are read, and every file not "
    "read is named. Nothing scanned is imported or executed (docs/METHOD.md §1)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="directories or files to scan")
    add_json_out(parser, "summary, findings and problems")
    parser.add_argument("--csv", type=Path, metavar="OUT", help="write one row per finding as CSV")
    parser.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=0,
        metavar="N",
        help="worker processes (default 0: one per CPU; 1: no workers)",
    )
    parser.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="PATTERN",
        help="also skip files and directories matching this name pattern (repeatable)",
    )
    parser.add_argument(
        "--no-default-ignores", action="store_true", help="scan .git, caches, node_modules and virtual environments too"
    )
    parser.add_argument("--no-follow-symlinks", action="store_true", help="do not follow symbolic links")
    parser.add_argument(
        "--max-file-mb",
        type=float,
        default=5.0,
        metavar="MB",
        help="text files larger than this are reported as too large, not read (default 5)",
    )
    parser.add_argument(
        "--mapping", type=Path, metavar="FILE", help="mapping table (default policy/scan/cuda-mapping.yaml)"
    )
    parser.add_argument(
        "--files", type=int, default=20, metavar="N", help="files listed in the by-file summary (default 20; 0: all)"
    )
    parser.add_argument("--list", action="store_true", help="also print every finding")
    add_no_progress(parser)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from workbench.scan import api as scan

    options = scan.scan_options(
        jobs=args.jobs,
        ignore=tuple(args.ignore),
        default_ignores=not args.no_default_ignores,
        follow_symlinks=not args.no_follow_symlinks,
        max_file_mib=args.max_file_mb,
        mapping=args.mapping,
        progress=not args.no_progress,
    )
    report = scan.scan(args.paths, options)
    print(scan.summary(report, files=args.files, list_findings=args.list))
    if args.json:
        print(f"json: {scan.write_json(report, args.json)}")
    if args.csv:
        print(f"csv: {scan.write_csv(report, args.csv)}")
    return 0 if report.complete else 130
