"""`ascend-workbench triage LOG_OR_DIR...`: which rank failed first, on which operator, why, and the fix.

Reads vLLM server logs, worker and rank logs, CANN log folders (`~/ascend/log/debug`: plog/plog-PID_*.log,
device-N/device-PID_*.log) and vllm-ascend collect_env pastes together; orders every error of every file
in time and names the first (docs/METHOD.md §6, §9). A file that cannot be read (binary, no permission,
missing) is named with the reason and the others are still read. Exit 0 when the triage ran (errors
found are its answer, not a failure), 2 on a user error (nothing readable, a bad knowledge-base file).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "triage",
        help="name the first failing rank, operator and error code in Ascend logs, with cause, fix and verify step",
        description="Triage vLLM server logs, worker/rank logs, CANN plog directories and collect_env output "
        "together: every CANN / AscendCL / aclnn / torch_npu / HCCL error code is looked up in "
        "policy/triage/error_codes.yaml; events of all files are ordered in time and the first error is explained "
        "(docs/METHOD.md §6, §9).",
    )
    parser.add_argument("paths", nargs="+", type=Path, metavar="LOG_OR_DIR", help="log files or directories (walked)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the whole report (every event) as JSON")
    parser.add_argument(
        "--codes", type=Path, metavar="FILE", help="error-code knowledge base (default policy/triage/error_codes.yaml)"
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from workbench.errors import WorkbenchError
    from workbench.triage.knowledge import load_knowledge_base
    from workbench.triage.render import render_text, report_dict
    from workbench.triage.report import triage_paths

    report = triage_paths([p.expanduser() for p in args.paths], load_knowledge_base(args.codes))
    if not report.inputs:
        reasons = "; ".join(f"{p.path}: {p.reason}" for p in report.problems)
        raise WorkbenchError(f"nothing to triage ({reasons}); give log files or a directory of logs")
    print(render_text(report))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report_dict(report), indent=1, ensure_ascii=False), encoding="utf-8")
        print(f"json: {args.json}")
    return 0
