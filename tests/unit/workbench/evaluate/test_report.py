"""Summaries and the float-vs-test comparison: numbers from hand-made record files, verdicts, the sentence."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from workbench.errors import WorkbenchError
from workbench.evaluate.report import compare_runs, summarize_run, summary_table, write_summary
from workbench.evaluate.store import RecordFile
from workbench.evaluate.thresholds import load_thresholds
from workbench.results.verdict import Verdict


def write_run(out: Path, dataset: str, kind: str, model: str, problems: dict[str, dict]) -> None:
    """A record file as `evaluate` writes it; `problems` maps id -> {logprobs, tokens, outcome}."""
    store = RecordFile(out / f"{dataset}.jsonl")
    key = {"dataset": dataset, "dataset_digest": "d1", "model": model, "model_root": f"/{model}"}
    store.start({"key": key, "dataset": {"name": dataset, "kind": kind}, "provenance": {"model": model}})
    for pid, spec in problems.items():
        logprobs = spec["logprobs"]
        store.append(
            {
                "kind": "nll",
                "id": pid,
                "prompt_sha": "p",
                "reference_ids": spec.get("ref_ids", [1, 2]),
                "logprobs": logprobs,
                "nll_sum": -math.fsum(logprobs),
                "n_tokens": len(logprobs),
                "clamped": 0,
            }
        )
        store.append(
            {
                "kind": "greedy",
                "id": pid,
                "prompt_sha": "p",
                "token_ids": spec["tokens"],
                "text": "x",
                "finish_reason": "stop",
            }
        )
        if "outcome" in spec:
            store.append({"kind": "execution", "id": pid, "outcome": spec["outcome"], "reason": ""})


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    ref, test = tmp_path / "float", tmp_path / "w8a8"
    # code: reference mean NLL (1 + 1 + 2 + 2) / 4 = 1.5; test (1.2 + 1.2 + 2.4 + 2.4) / 4 = 1.8 -> +20%
    write_run(
        ref,
        "humaneval",
        "code",
        "float",
        {
            "h0": {"logprobs": [-1.0, -1.0], "tokens": [1, 2, 3, 4], "outcome": "passed"},
            "h1": {"logprobs": [-2.0, -2.0], "tokens": [5, 6], "outcome": "passed"},
        },
    )
    write_run(
        test,
        "humaneval",
        "code",
        "w8a8",
        {
            "h0": {"logprobs": [-1.2, -1.2], "tokens": [1, 2, 9, 9], "outcome": "passed"},
            "h1": {"logprobs": [-2.4, -2.4], "tokens": [5, 6], "outcome": "failed"},
        },
    )
    # text: reference 1.0, test 1.005 -> +0.5%
    write_run(ref, "text", "text", "float", {"t0": {"logprobs": [-1.0, -1.0], "tokens": [7, 8]}})
    write_run(test, "text", "text", "w8a8", {"t0": {"logprobs": [-1.005, -1.005], "tokens": [7, 8]}})
    return ref, test


def test_summary_of_one_run(runs: tuple[Path, Path]) -> None:
    ref, _ = runs
    summaries = summarize_run(ref)
    code = summaries["humaneval"]
    assert code.nll.tokens == 4 and code.nll.mean == 1.5 and code.nll.macro_mean == 1.5
    assert code.completions == 2 and code.mean_completion_tokens == 3.0 and code.pass_at_1 == 1.0
    assert math.isnan(summaries["text"].pass_at_1)
    table = summary_table(ref)
    assert list(table["dataset"]) == ["humaneval", "text"] and list(table["passed"]) == [2, 0]


def test_comparison_numbers_verdicts_and_the_code_versus_prose_sentence(runs: tuple[Path, Path]) -> None:
    ref, test = runs
    comparison = compare_runs(ref, test)
    code, text = comparison.datasets
    assert code.nll_reference == 1.5 and code.nll_test == pytest.approx(1.8)
    assert code.nll_increase_pct == pytest.approx(20.0) and code.worst_problem == "h1"
    assert code.agreement.mean == 0.75 and code.agreement.exact_match_rate == 0.5  # (2/4 + 2/2) / 2
    assert (code.pass_reference, code.pass_test, code.pass_drop_pct) == (1.0, 0.5, 50.0)
    verdicts = {f.metric: f.verdict for f in code.findings}
    assert verdicts == {
        "nll_increase_pct": Verdict.ERROR,
        "greedy_agreement": Verdict.PASS,
        "pass_at_1_drop_pct": Verdict.ERROR,
    }
    assert text.nll_increase_pct == pytest.approx(0.5) and text.verdict is Verdict.PASS
    assert comparison.verdict is Verdict.ERROR
    assert len(comparison.sentences) == 1 and "Code degrades more than prose" in comparison.sentences[0]
    assert "20.00% on humaneval against 0.50% on text" in comparison.sentences[0]
    assert "humaneval (code): error" in comparison.text()
    assert list(comparison.table()["verdict"]) == ["error", "pass"]


def test_no_sentence_when_prose_degrades_as_much(runs: tuple[Path, Path], tmp_path: Path) -> None:
    ref, _ = runs
    test = tmp_path / "other"
    write_run(
        test,
        "humaneval",
        "code",
        "w8a8",
        {
            "h0": {"logprobs": [-1.008, -1.008], "tokens": [1, 2, 3, 4], "outcome": "passed"},
            "h1": {"logprobs": [-2.016, -2.016], "tokens": [5, 6], "outcome": "passed"},
        },
    )
    write_run(test, "text", "text", "w8a8", {"t0": {"logprobs": [-1.008, -1.008], "tokens": [7, 8]}})
    comparison = compare_runs(ref, test)
    assert [d.nll_increase_pct for d in comparison.datasets] == [pytest.approx(0.8), pytest.approx(0.8)]
    assert comparison.sentences == () and comparison.verdict is Verdict.PASS


def test_retokenised_problems_are_left_out(runs: tuple[Path, Path], tmp_path: Path) -> None:
    ref, _ = runs
    test = tmp_path / "tok"
    write_run(test, "text", "text", "other", {"t0": {"logprobs": [-3.0], "tokens": [7, 8], "ref_ids": [42]}})
    (text,) = compare_runs(ref, test).datasets
    assert text.nll_problems == 0 and text.retokenised == 1 and math.isnan(text.nll_reference)
    assert {f.metric: f.verdict for f in text.findings}["nll_increase_pct"] is None
    assert text.row()["verdict"] == "pass"  # the greedy agreement was still judged


def test_summary_file_is_stamped(runs: tuple[Path, Path]) -> None:
    ref, test = runs
    import json

    path = write_summary(test, compare_runs(ref, test))
    data = json.loads(path.read_text())
    assert data["provenance"] == {"model": "w8a8"} and data["reference_provenance"] == {"model": "float"}
    assert data["comparison"]["verdict"] == "error" and set(data["datasets"]) == {"humaneval", "text"}


def test_missing_or_unrelated_runs_give_one_clear_error(runs: tuple[Path, Path], tmp_path: Path) -> None:
    ref, _ = runs
    with pytest.raises(WorkbenchError, match="no such evaluate run directory"):
        compare_runs(ref, tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(WorkbenchError, match="holds no evaluate results"):
        compare_runs(ref, tmp_path / "empty")
    write_run(tmp_path / "mine", "mine", "text", "m", {"a": {"logprobs": [-1.0], "tokens": [1]}})
    with pytest.raises(WorkbenchError, match="share no data set"):
        compare_runs(ref, tmp_path / "mine")


def test_shipped_thresholds_and_their_errors(tmp_path: Path) -> None:
    shipped = load_thresholds()
    assert shipped.kinds and shipped.code_vs_prose.ratio > 1
    typo = tmp_path / "t.yaml"
    typo.write_text("name: t\nkinds:\n  code:\n    nll_increse_pct: {warning: 1}\n")
    with pytest.raises(
        WorkbenchError, match=r"kinds.code.nll_increse_pct: unknown key; did you mean 'nll_increase_pct'"
    ):
        load_thresholds(typo)
    inverted = tmp_path / "i.yaml"
    inverted.write_text("name: i\nkinds:\n  text:\n    nll_increase_pct: {warning: 5, error: 1}\n")
    with pytest.raises(WorkbenchError, match=r"warning \(5.0\) must not exceed error \(1.0\)"):
        load_thresholds(inverted)


def test_comparison_figure_shows_both_sides_and_the_verdicts(runs: tuple[Path, Path]) -> None:
    from workbench.evaluate.charts import comparison_figure

    ref, test = runs
    figure = comparison_figure(compare_runs(ref, test).table(), "float", "w8a8")
    bars = [t for t in figure.data if t.type == "bar"]
    assert [t.name for t in bars[:2]] == ["float", "w8a8"] and list(bars[0].x) == ["humaneval (error)", "text (pass)"]
    assert list(bars[1].y) == [pytest.approx(1.8), pytest.approx(1.005)]
    assert list(bars[3].x) == ["humaneval (error)"] and list(bars[3].y) == [0.5]  # pass@1 of the test side
    assert figure.layout.title.text == "w8a8 against float"


def test_pass_at_1_is_not_judged_when_the_reference_passes_nothing(tmp_path: Path) -> None:
    """0 of N on both sides is not "no change": pass@1 cannot drop from 0, so it is said to carry nothing."""
    spec = {
        "h0": {"logprobs": [-1.0], "tokens": [1], "outcome": "failed"},
        "h1": {"logprobs": [-1.0], "tokens": [2], "outcome": "failed"},
    }
    write_run(tmp_path / "float", "humaneval", "code", "float", spec)
    write_run(tmp_path / "w8a8", "humaneval", "code", "w8a8", spec)
    (code,) = compare_runs(tmp_path / "float", tmp_path / "w8a8").datasets
    finding = {f.metric: f for f in code.findings}["pass_at_1_drop_pct"]
    assert finding.verdict is None and finding.value is None
    assert "cannot show a drop" in finding.detail and "NLL and greedy agreement carry the comparison" in finding.detail
    assert code.verdict is Verdict.PASS  # judged by what can move: NLL and agreement
