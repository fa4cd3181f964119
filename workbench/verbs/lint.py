"""`ascend-workbench lint`: what a serving command will really do on the vllm-ascend release it runs on.

    ascend-workbench lint serve.sh --release v0.11.0           # a script, a recipe, or '-' (stdin)
    ascend-workbench lint "vllm serve /m --additional-config '{...}'" --release v0.13.0
    ascend-workbench lint serve.sh --release v0.11.0 --to v0.13.0   # what an upgrade changes
    ascend-workbench lint serve.sh --release v0.11.0 --fix serve.v0.11.sh   # a migrated copy + its diff
    ascend-workbench lint recipes/serving/ascend-7b-chat.yaml --json findings.json
    ascend-workbench lint --checkpoint /ckpt [--release v0.18.0] [--json]   # will the release load it?

Exit 0: no error; 1: at least one setting fails or does nothing on that release; 2: unreadable input.
The verb turns its flags into one `LintRequest` and prints what `run_lint` returns.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HELP = "judge a serving command, script or recipe against a vllm-ascend release (dead, renamed, rejected ...)"
DESCRIPTION = (
    "Read a serving recipe, a shell script or a pasted command (export lines, VAR=x prefixes, vllm serve / "
    "api_server flags, --additional-config and --compilation-config JSON) and give one finding per setting for "
    "the vllm-ascend release it runs on: rejected, unknown, renamed, dead, deprecated, rewritten, known_broken, "
    "duplicate, misuse, required_missing, foreign or ok, each with the reason, the fix and the TAG:path:line of "
    "vllm-ascend's source that says so. The release comes from --release, else the installed vllm-ascend, else "
    "a stack fingerprint (--stack, or this machine's torch_npu), else main, and is printed with its basis."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "source",
        nargs="?",
        metavar="RECIPE_OR_SCRIPT",
        help="a serving recipe (.yaml), a shell script, '-' for standard input, or the command in quotes",
    )
    parser.add_argument("--release", metavar="TAG", help="the vllm-ascend release, e.g. v0.11.0, 0.13.0rc1 or main")
    parser.add_argument("--to", metavar="TAG", help="also lint at TAG and list what changes on that upgrade")
    parser.add_argument(
        "--fix", type=Path, metavar="OUT", help="write a migrated copy to OUT (never in place) and print the diff"
    )
    parser.add_argument(
        "--stack", type=Path, metavar="FILE", help="a lock or result file whose stack names the release"
    )
    parser.add_argument(
        "--model-type",
        metavar="TYPE",
        help="the served model's type (qwen2_5_vl) or architecture, for rules that depend on the model, when the "
        "command's model path has no readable config.json",
    )
    parser.add_argument(
        "--json", nargs="?", const="-", metavar="OUT", help="write the result document (kind 'lint') to OUT, or stdout"
    )
    parser.add_argument("--all", action="store_true", help="show ok and foreign settings too (default: only findings)")
    parser.add_argument(
        "--checkpoint",
        type=Path,
        metavar="PATH",
        help="lint a quantized checkpoint directory (or its quant_model_description.json) instead: will the "
        "release load it? Without --release (and no vllm-ascend here), every tag of the capability table",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from workbench.lint.api import LintInputError, LintRequest, run_lint

    stack = None
    if args.stack is not None:
        from workbench.backend.api import read_stack

        stack = read_stack(args.stack)
    from workbench.deploy.api import lint_reader  # deployment files (manifests, compose, --config, Dockerfiles)

    request = LintRequest(
        source=args.source,
        release=args.release,
        to=args.to,
        fix=args.fix,
        stack=stack,
        stack_source=str(args.stack),
        model_type=args.model_type,
        checkpoint=args.checkpoint,
        readers=(lint_reader,),
    )
    try:
        result = run_lint(request)
    except LintInputError as exc:
        print(f"ascend-workbench lint: {exc}", file=sys.stderr)
        return 2
    if args.json == "-":
        from workbench.lint.api import LINT_KIND
        from workbench.results.envelope import envelope
        from workbench.stack.provenance import provenance

        json.dump(envelope(result.to_dict(), provenance(), LINT_KIND), sys.stdout, indent=1, default=str)
        print()
        return result.exit_code
    print(result.text(show_all=args.all))
    if args.json:
        print(f"wrote {result.write(args.json)}")
    return result.exit_code
