"""`evaluate` end to end against the shared tiny server: HumanEval subset and the text set.

The tiny model has random weights and answers gibberish, so nothing here judges its quality; the test
checks that the pipeline's numbers are well-formed and consistent: NLL finite and positive over exactly
the reference's tokens (as the server tokenises them), completions within their caps, every code problem
executed in the sandbox, canonical solutions passing, a rerun resuming without a request, and the same
server compared with itself giving agreement 1.0 and no NLL change.
"""

from __future__ import annotations

import json
import math

import httpx
import pytest

from workbench.cli import main
from workbench.evaluate.datasets import load_dataset
from workbench.evaluate.execution import Outcome, run_problem
from workbench.evaluate.report import compare_runs, read_run
from workbench.evaluate.runner import Settings, evaluate

pytestmark = pytest.mark.integration

CAP = 32  # greedy tokens, code and text alike (as --max-tokens sets them)
SETTINGS = Settings(max_tokens_code=CAP, max_tokens_text=CAP, concurrency=1)  # one at a time: identical batches


@pytest.fixture(scope="module")
def first_run(tiny_server, tmp_path_factory):
    out = tmp_path_factory.mktemp("evaluate") / "first"
    evaluate(tiny_server, ["humaneval", "text"], out, limit=3, settings=SETTINGS, progress=False)
    return out


def test_records_are_well_formed(tiny_server, first_run):
    runs = read_run(first_run)
    assert set(runs) == {"humaneval", "text"}
    code, text = runs["humaneval"], runs["text"]
    assert list(code.nll) == list(code.greedy) == list(code.execution) == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    assert len(text.nll) == len(text.greedy) == 3 and not text.execution
    assert code.header["provenance"]["model"] == "tiny" and code.header["provenance"]["stack"]
    problems = {p.id: p for p in load_dataset("humaneval", limit=3).problems}
    for pid, record in code.nll.items():
        reference = httpx.post(
            f"{tiny_server.url}/tokenize", json={"prompt": problems[pid].reference, "add_special_tokens": False}
        ).json()["tokens"]
        assert record["reference_ids"] == reference and record["n_tokens"] == len(reference) > 0
        assert math.isfinite(record["nll_sum"]) and record["nll_sum"] > 0 and record["clamped"] == 0
        assert record["nll_sum"] == pytest.approx(-math.fsum(record["logprobs"]), rel=1e-15)
    for record in [*code.greedy.values(), *text.greedy.values()]:
        assert 1 <= len(record["token_ids"]) <= CAP and not record["token_ids_from_text"]
    assert all(
        r["outcome"] in {o.value for o in Outcome} and r["isolation"] or r["outcome"] != "passed"
        for r in code.execution.values()
    )


def test_canonical_solutions_pass_through_the_executor(first_run):
    problems = load_dataset("humaneval", limit=3).problems
    assert [run_problem(p, p.reference).outcome for p in problems] == [Outcome.PASSED] * 3


def test_a_rerun_resumes_without_new_records(tiny_server, first_run):
    before = {p.name: p.read_bytes() for p in first_run.glob("*.jsonl")}
    evaluate(tiny_server, ["humaneval", "text"], first_run, limit=3, settings=SETTINGS, progress=False)
    assert {p.name: p.read_bytes() for p in first_run.glob("*.jsonl")} == before


def test_cli_against_itself_agrees_completely(tiny_server, first_run, tmp_path, capsys):
    second = tmp_path / "second"
    argv = [
        "evaluate",
        "--url",
        tiny_server.url,
        "--dataset",
        "humaneval",
        "text",
        "--limit",
        "3",
        "--max-tokens",
        str(CAP),
        "--concurrency",
        "1",
        "--out",
        str(second),
        "--reference",
        str(first_run),
        "--json",
        str(tmp_path / "summary.json"),
        "--no-progress",
    ]
    assert main(argv) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "humaneval (code): pass" in printed and "text (text): pass" in printed
    for compared in compare_runs(first_run, second).datasets:
        assert compared.agreement.mean == 1.0 and compared.agreement.exact_match_rate == 1.0
        assert compared.nll_problems == 3 and abs(compared.nll_delta) < 1e-6
    code = compare_runs(first_run, second).datasets[0]
    assert code.pass_problems == 3 and code.pass_reference == code.pass_test
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["provenance"]["url"] == tiny_server.url and "comparison" in summary
