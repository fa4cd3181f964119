"""`ascend-workbench twin` end to end against two fake servers (--url twice): output, files, exit codes."""

from __future__ import annotations

import json

import pytest

from workbench import cli


def test_the_verb_prints_the_table_and_verdict_and_fails_on_a_divergence(fake_server, prompts, tmp_path, capsys):
    a, b = fake_server(), fake_server(flips={(47, 1)})
    out = tmp_path / "run"
    code = cli.main(
        [
            "twin",
            "--url",
            a.url,
            "--url",
            b.url,
            "--prompts",
            str(prompts),
            "--max-tokens",
            "4",
            "--batch",
            "1",
            "4",
            "--out",
            str(out),
            "--no-progress",
            "--json",
            str(tmp_path / "r.json"),
        ]
    )
    printed = capsys.readouterr()
    assert code == 1
    assert "verdict: error" in printed.out and "diverged" in printed.out
    assert "module stage skipped: a side is a URL" in printed.out
    assert json.loads((out / "twin.json").read_text())["module_stage"].startswith("a side is a URL")
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["diverged"] == 1
    assert (out / "A.jsonl").is_file() and (out / "A.noise1.jsonl").is_file() and (out / "B.jsonl").is_file()
    assert [len(r["prompt"]) for r in b.requests] == [4]  # --batch 1 4: B sent all four prompts at once


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["twin"], "give the sides"),
        (["twin", "--recipe", "cpu-tiny", "--locate-steps", "3"], "--locate-prompt"),
        (["twin", "--recipe", "cpu-tiny", "--set", "B=1"], "SIDE:FIELD=VALUE"),
        (["twin", "--recipe", "cpu-tiny", "--top-logprobs", "50", "--no-progress"], "choose 1 to 20"),
    ],
)
def test_bad_flags_get_one_clear_line(argv, words, capsys):
    assert cli.main(argv) == 2
    assert words in capsys.readouterr().err
