"""`ascend-workbench triage LOG_OR_DIR...`: which rank failed first, on which operator, why, and the fix.

Reads vLLM server logs, worker and rank logs, CANN log folders (`~/ascend/log/debug`: plog/plog-PID_*.log,
device-N/device-PID_*.log) and vllm-ascend collect_env pastes together; orders every error of every file
in time and names the first (docs/METHOD.md §6, §9). A file that cannot be read (binary, no permission,
missing) is named with the reason and the others are still read. Exit 0 when the triage ran (errors
found are its answer, not a failure), 2 on a user error (nothing readable, a bad knowledge-base file).
The verb turns its flags into one `TriageRequest` and prints what `run_triage` returns.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.verbs._common import add_json_out

HELP = "name the first failing rank, operator and error code in Ascend logs, with cause, fix and verify step"
DESCRIPTION = (
    "Triage vLLM server logs, worker/rank logs, CANN plog directories and collect_env output "
    "together: every CANN / AscendCL / aclnn / torch_npu / HCCL error code is looked up in "
    "policy/triage/error_codes.yaml; events of all files are ordered in time and the first error is explained "
    "(docs/METHOD.md §6, §9)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", type=Path, metavar="LOG_OR_DIR", help="log files or directories (walked)")
    add_json_out(parser, "the whole report (every event), a document of kind 'triage'")
    parser.add_argument(
        "--codes", type=Path, metavar="FILE", help="error-code knowledge base (default policy/triage/error_codes.yaml)"
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from workbench.triage.api import TriageRequest, run_triage

    result = run_triage(TriageRequest(paths=tuple(args.paths), codes=args.codes))
    print(result.text())
    if args.json:
        print(f"json: {result.write(args.json)}")
    return result.exit_code
