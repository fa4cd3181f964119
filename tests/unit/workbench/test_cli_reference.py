"""docs/CLI.md is generated from the verbs' parsers and kept current by this test."""

from __future__ import annotations

import argparse

from workbench import cli_reference
from workbench.cli import _verb_modules, build_parser


def test_the_cli_reference_is_current():
    current = cli_reference.REFERENCE.read_text(encoding="utf-8")
    assert current == cli_reference.reference(), (
        f"docs/CLI.md is stale: regenerate it with `{cli_reference.REGENERATE}` and commit it"
    )


def test_every_verb_and_every_flag_is_in_the_reference():
    text = cli_reference.reference()
    parser = build_parser()
    verbs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(verbs.choices) == set(_verb_modules())
    for verb, sub in verbs.choices.items():
        assert f"## `{verb}`" in text
        for action in sub._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in text or f", {flag}" in text, f"{verb} {flag} missing from docs/CLI.md"


def test_every_flag_says_what_it_does():
    """A flag without help text would be a bare row in the reference: every verb documents every flag."""
    parser = build_parser()
    verbs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = []
    stack = list(verbs.choices.items())
    while stack:
        name, sub = stack.pop()
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack += [(f"{name} {k}", v) for k, v in action.choices.items()]
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, f"flags without help: {missing}"


def test_check_mode_reports_a_stale_page(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "CLI.md"
    stale.write_text("old\n")
    monkeypatch.setattr(cli_reference, "REFERENCE", stale)
    assert cli_reference.main(["--check"]) == 1
    assert "is stale; regenerate it with" in capsys.readouterr().err
    assert cli_reference.main([]) == 0 and cli_reference.main(["--check"]) == 0
