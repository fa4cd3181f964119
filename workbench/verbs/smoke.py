"""`ascend-workbench smoke (--url URL | --recipe FILE)`: the first request, with a verdict per check.

Exit status 0 when every check passes, 1 when one fails (the report says which and why), 2 when the
server would not start (the crash class and its fix are printed).
"""

from __future__ import annotations

import argparse

from workbench.serving.api import DEFAULT_PROMPT, run_smoke
from workbench.verbs._common import add_json_out, add_server_source, server_from_args

HELP = "send the first requests (models, chat, streamed completion) and judge the answers"
DESCRIPTION = (
    "Attach to --url or launch --recipe, then check /v1/models, one chat completion and one "
    "streamed completion (non-empty text, finish reason, usage). A launched server is always stopped."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_server_source(parser)
    parser.add_argument("--prompt", default=DEFAULT_PROMPT, help="chat prompt (default: %(default)r)")
    parser.add_argument("--max-tokens", type=int, default=32, help="tokens the chat check may generate (default 32)")
    parser.add_argument("--expect", help="a word the chat answer must contain, e.g. Paris")
    add_json_out(parser, "the report")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    with server_from_args(args) as server:
        report = run_smoke(server, prompt=args.prompt, max_tokens=args.max_tokens, expect=args.expect)
    print(report.summary())
    print(f"answer: {report.answer!r}")
    if args.json:
        print(f"json: {report.write(args.json)}")
    return 0 if report.passed else 1
