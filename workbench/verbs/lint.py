"""`ascend-workbench lint`: what a serving command will really do on the vllm-ascend release it runs on.

    ascend-workbench lint serve.sh --release v0.11.0           # a script, a recipe, or '-' (stdin)
    ascend-workbench lint "vllm serve /m --additional-config '{...}'" --release v0.13.0
    ascend-workbench lint serve.sh --release v0.11.0 --to v0.13.0   # what an upgrade changes
    ascend-workbench lint serve.sh --release v0.11.0 --fix serve.v0.11.sh   # a migrated copy + its diff
    ascend-workbench lint recipes/serving/ascend-7b-chat.yaml --json findings.json
    ascend-workbench lint --checkpoint /ckpt [--release v0.18.0] [--json]   # will the release load it?

Exit 0: no error; 1: at least one setting fails or does nothing on that release; 2: unreadable input.
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
        "source", nargs="?", metavar="RECIPE_OR_SCRIPT",
        help="a serving recipe (.yaml), a shell script, '-' for standard input, or the command in quotes",
    )  # fmt: skip
    parser.add_argument("--release", metavar="TAG", help="the vllm-ascend release, e.g. v0.11.0, 0.13.0rc1 or main")
    parser.add_argument("--to", metavar="TAG", help="also lint at TAG and list what changes on that upgrade")
    parser.add_argument(
        "--fix", type=Path, metavar="OUT", help="write a migrated copy to OUT (never in place) and print the diff"
    )
    parser.add_argument(
        "--stack", type=Path, metavar="FILE", help="a lock or result file whose stack names the release"
    )
    parser.add_argument(
        "--json", nargs="?", const="-", metavar="OUT", help="write the findings as JSON records to OUT (or stdout)"
    )
    parser.add_argument("--all", action="store_true", help="show ok and foreign settings too (default: only findings)")
    parser.add_argument(
        "--checkpoint", type=Path, metavar="PATH",
        help="lint a quantized checkpoint directory (or its quant_model_description.json) instead: will the "
        "release load it? Without --release (and no vllm-ascend here), every tag of the capability table",
    )  # fmt: skip
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from workbench.errors import WorkbenchError
    from workbench.lint.api import LintInputError, lint_source, lint_upgrade, write_fix

    if args.checkpoint is not None and args.source:
        raise WorkbenchError("lint: give a command/recipe or --checkpoint PATH, not both")
    if not args.source and args.checkpoint is None:
        raise WorkbenchError("lint: give a serving recipe, a script, '-' for standard input, or the command in quotes")
    stack = None
    if args.stack is not None:
        from workbench.backend.api import read_stack

        stack = read_stack(args.stack)
    if args.checkpoint is not None:
        return run_checkpoint(args, stack)
    from workbench.deploy.api import lint_reader  # deployment files (manifests, compose, --config, Dockerfiles)

    readers = (lint_reader,)
    try:
        report = lint_source(
            args.source, release=args.release, stack=stack, stack_source=str(args.stack), readers=readers
        )
        upgrade = lint_upgrade(args.source, args.release, args.to, readers=readers, stack=stack) if args.to else None
    except LintInputError as exc:
        print(f"ascend-workbench lint: {exc}", file=sys.stderr)
        return 2
    # --json: a list of records, each naming its release and basis (with --to, both releases' records)
    records = report.records() + (upgrade.after.records() if upgrade is not None else [])
    if args.json == "-":
        json.dump(records, sys.stdout, indent=1, default=str)
        print()
    else:
        _print(report, show_all=args.all)
        if upgrade is not None:
            _print_upgrade(upgrade)
        if args.json:
            from workbench.results.files import write_json

            print(f"wrote {write_json(Path(args.json), records)}")
    if args.fix is not None:
        diff = write_fix(upgrade.after if upgrade is not None else report, args.fix)
        print(diff or f"{args.fix}: nothing to migrate (written unchanged)")
        print(f"wrote {args.fix}")
    return report.exit_code


def _print(report, show_all: bool) -> None:
    print(report.headline())
    shown = [f for f in report.findings if show_all or f.severity.value != "pass"]
    if not shown:
        print("no findings: every setting is read as written" + ("" if show_all else " (--all lists them)"))
        return
    for finding in shown:
        print(_block(finding))


def _block(finding) -> str:
    value = "" if finding.value is None else f" = {_short(finding.value)}"
    lines = [
        f"line {finding.line:<4} {finding.setting}{value}",
        f"          {finding.finding.value} ({finding.severity.value}): {finding.reason}",
    ]
    if finding.fix:
        lines.append(f"          fix: {finding.fix}")
    if finding.cite:
        lines.append(f"          source: {finding.cite}")
    return "\n".join(lines)


def _short(value) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 80 else text[:77] + "..."


def _print_upgrade(upgrade) -> None:
    changes = upgrade.changes()
    before, after = upgrade.before.target.release, upgrade.after.target.release
    print(f"\nupgrade {before} -> {after}: {len(changes)} setting(s) change")
    for row in changes:
        print(
            f"line {row['line']:<4} {row['setting']}: {row['at ' + before]} -> {row['at ' + after]}: "
            f"{row['what changes']}" + (f" (fix: {row['fix']})" if row["fix"] else "")
        )


def run_checkpoint(args: argparse.Namespace, stack) -> int:
    """`lint --checkpoint PATH`: the capability table's verdict per release; exit 1 on any error."""
    from workbench.lint.api import checkpoint_release, findings_text, lint_checkpoint, verdicts

    release, basis = checkpoint_release(args.release, stack, str(args.stack))
    findings = lint_checkpoint(args.checkpoint, release, basis)
    records = [f.to_dict() for f in findings]
    if args.json == "-":
        json.dump(records, sys.stdout, indent=1)
        print()
    else:
        print(f"checkpoint {args.checkpoint}: " + (f"release {release} ({basis})" if release else
                                                   "every tag of the capability table (name one with --release)"))  # fmt: skip
        print(findings_text(findings))
        if release is None:
            print("verdict per tag: " + ", ".join(f"{tag} {v}" for tag, v in verdicts(findings).items()))
        if args.json:
            from workbench.results.files import write_json

            print(f"wrote {write_json(Path(args.json), records)}")
    return 1 if any(f.severity == "error" for f in findings) else 0
