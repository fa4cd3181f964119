"""`ascend-workbench check`: the environment pre-flight without Jupyter.

Prints one line per check and the fixes; `--json` / `--html` also write the report. Exit code 1 when
any check fails (so CI and scripts can gate on it), 0 otherwise; warnings do not fail.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.verbs._common import add_json_out

HELP = (
    "environment pre-flight (versions vs matrix, CANN, npu-smi, /dev/shm); --cluster: node bundles against each other"
)
DESCRIPTION = (
    "Check this machine against the verified vllm-ascend combinations and the "
    "ten-minute pre-flight (docs/METHOD.md §2, §14). NPU items are skipped (with the reason) on machines without an NPU. "
    "Exit code 1 when any check fails."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_json_out(parser, "the report")
    parser.add_argument("--html", type=Path, metavar="OUT", help="write the report as a standalone HTML page to OUT")
    parser.add_argument(
        "--matrix",
        type=Path,
        action="append",
        metavar="FILE",
        help="verified-combination YAML to match against (repeatable; default recipes/matrices/*.yaml)",
    )
    parser.add_argument(
        "--ascend-root",
        type=Path,
        metavar="DIR",
        help="where CANN/driver/firmware are installed (default $ASCEND_WORKBENCH_ASCEND_ROOT or /usr/local/Ascend)",
    )
    parser.add_argument(
        "--source",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="a vllm or vllm-ascend source checkout to test for importability (repeatable)",
    )
    parser.add_argument(
        "--server-url", metavar="URL", help="send one small chat request to this OpenAI-compatible server"
    )
    parser.add_argument(
        "--cluster",
        nargs="+",
        type=Path,
        metavar="BUNDLE",
        help="check these node bundles against each other instead of this machine (files from `collect`)",
    )
    parser.add_argument("--rules", type=Path, metavar="FILE", help="cluster rules (default policy/cluster/rules.yaml)")
    parser.add_argument("--no-probe", action="store_true", help="skip the device-initialisation probe subprocess")
    parser.add_argument(
        "--probe-timeout",
        type=float,
        default=90.0,
        metavar="S",
        help="seconds before the device probe counts as hung (default 90)",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    if args.cluster:
        return handle_cluster(args)
    from workbench.envcheck import api as envcheck

    ctx = envcheck.CheckContext.from_environment(
        ascend_root=args.ascend_root,
        matrix_files=args.matrix,
        source_checkouts=tuple(args.source),
        server_url=args.server_url,
        run_probe=not args.no_probe,
        probe_timeout_s=args.probe_timeout,
    )
    report = envcheck.run_checks(ctx)
    print(envcheck.to_text(report))
    if args.json:
        print(f"json: {envcheck.write_json(report, args.json)}")
    if args.html:
        print(f"html: {envcheck.write_html(report, args.html)}")
    return 1 if report.failed else 0


def handle_cluster(args: argparse.Namespace) -> int:
    """`check --cluster BUNDLE...`: the nodes against each other (docs/METHOD.md §20); exit 1 on an error."""
    from workbench.cluster.api import ClusterCheckRequest, run_cluster_check

    result = run_cluster_check(ClusterCheckRequest(tuple(args.cluster), args.rules, args.json))
    print(result.text())
    if args.json:
        print(f"json: {args.json}")
    return 1 if result.failed else 0
