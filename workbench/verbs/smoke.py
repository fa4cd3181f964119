"""`ascend-workbench smoke (--url URL | --recipe FILE)`: the first request, with a verdict per check.

Exit status 0 when every check passes, 1 when one fails (the report says which and why), 2 when the
server would not start (the crash class and its fix are printed).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from workbench.serving.smoke import DEFAULT_PROMPT, run_smoke
from workbench.verbs.serve import add_server_arguments, server_from_args


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "smoke",
        help="send the first requests (models, chat, streamed completion) and judge the answers",
        description="Attach to --url or launch --recipe, then check /v1/models, one chat completion and one "
        "streamed completion (non-empty text, finish reason, usage). A launched server is always stopped.",
    )
    add_server_arguments(parser)
    parser.add_argument("--prompt", default=DEFAULT_PROMPT, help="chat prompt (default: %(default)r)")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--expect", help="a word the chat answer must contain, e.g. Paris")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the report as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    with server_from_args(args) as server:
        report = run_smoke(server, prompt=args.prompt, max_tokens=args.max_tokens, expect=args.expect)
    print(report.summary())
    print(f"answer: {report.answer!r}")
    if args.json:
        payload = {
            "url": report.url,
            "model": report.model,
            "passed": report.passed,
            "checks": report.to_frame().to_dict(orient="records"),
            "diagnosis": report.diagnosis.as_row() if report.diagnosis else None,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=1))
    return 0 if report.passed else 1
