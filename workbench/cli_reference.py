"""`docs/CLI.md`, generated from the verbs' own parsers, so the reference cannot drift from `--help`.

    python -m workbench.cli_reference            # rewrite docs/CLI.md
    python -m workbench.cli_reference --check    # exit 1 when docs/CLI.md is stale (the unit test does this)

The page is built from argparse's declarations (option strings, metavars, defaults, help text, argument
groups, nested actions such as `lock write`), not from `format_help()`, so it does not depend on the
terminal's width.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workbench.cli import build_parser

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "CLI.md"
REGENERATE = "python -m workbench.cli_reference"

_HEADER = f"""# `ascend-workbench` command reference

Generated from the verbs' parsers by `{REGENERATE}`; a unit test fails when it is stale. Every verb also
answers `--help`. Exit codes: 0 success, 1 the check found a problem (a failing verdict, a regression),
2 unusable input (one line on standard error names the flag or file and the fix), 130 interrupted
(results written so far are kept).
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _flag(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    names = ", ".join(action.option_strings)
    if action.nargs == 0:
        return f"`{names}`"
    metavar = action.metavar or action.dest.upper()
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    if action.nargs in ("+", "*"):
        metavar = f"{metavar} ..."
    elif action.nargs == "?":
        metavar = f"[{metavar}]"
    return f"`{names} {metavar}`"


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "prog": "ascend-workbench"}
    if action.choices and not isinstance(action, argparse._SubParsersAction):
        choices = ", ".join(str(c) for c in action.choices)
        text = f"{text} (one of: {choices})" if text else f"one of: {choices}"
    return _cell(text) or "&nbsp;"


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _options(parser: argparse.ArgumentParser) -> list[str]:
    lines: list[str] = []
    for group in parser._action_groups:
        actions = [
            a
            for a in group._group_actions
            if a.help != argparse.SUPPRESS and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
        ]
        if not actions:
            continue
        title = group.title if group.title not in ("options", "optional arguments") else "options"
        lines += ["", f"*{title}*", "", "| argument | meaning |", "|---|---|"]
        lines += [f"| {_flag(a)} | {_help(a)} |" for a in actions]
    return lines


def _verb(name: str, parser: argparse.ArgumentParser, summary: str, level: int) -> list[str]:
    lines = ["", f"{'#' * level} `{name}`", "", _cell(summary)]
    if parser.description and _cell(parser.description) != _cell(summary):
        lines += ["", _cell(parser.description)]
    usage = " ".join(parser.format_usage().removeprefix("usage: ").split())  # unwrapped: width-independent
    lines += ["", "```text", usage, "```"]
    lines += _options(parser)
    nested = _subparsers(parser)
    if nested is not None:
        helps = {choice.dest: choice.help or "" for choice in nested._choices_actions}
        for action, sub in nested.choices.items():
            lines += _verb(f"{name} {action}", sub, helps.get(action, ""), level + 1)
    return lines


def reference() -> str:
    """The whole page: the verb list, then one section per verb in alphabetical order."""
    parser = build_parser()
    verbs = _subparsers(parser)
    assert verbs is not None
    helps = {choice.dest: choice.help or "" for choice in verbs._choices_actions}
    lines = [_HEADER.rstrip("\n"), "", "| verb | what it does |", "|---|---|"]
    lines += [f"| [`{v}`](#{v}) | {_cell(helps[v])} |" for v in verbs.choices]
    for verb, sub in verbs.choices.items():
        lines += _verb(verb, sub, helps[verb], 2)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = reference()
    if argv == ["--check"]:
        current = REFERENCE.read_text(encoding="utf-8") if REFERENCE.exists() else ""
        if current != text:
            print(f"{REFERENCE} is stale; regenerate it with `{REGENERATE}`", file=sys.stderr)
            return 1
        return 0
    REFERENCE.write_text(text, encoding="utf-8")
    print(f"wrote {REFERENCE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
