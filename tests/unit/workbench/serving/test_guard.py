"""The output guard on real outputs from public issues (tests/fixtures/replay/guard_corpus.jsonl, each cited).

The thresholds (policy/replay/guard.yaml) were tuned on the corpus's `tune` half only: every tune item is
classified as labelled. The `test` half is scored, not tuned on: its precision and recall must stay at least
what they were when the thresholds were set (benchmarks/bench_replay.py prints both halves).
"""

from __future__ import annotations

import json
import math

from tests.conftest import REPO_ROOT
from workbench.serving.guard import GuardIssue, GuardScope, GuardSummary, check_output, check_tokens

CORPUS = [
    json.loads(line) for line in (REPO_ROOT / "tests/fixtures/replay/guard_corpus.jsonl").read_text().splitlines()
]


def flagged(item) -> bool:
    return bool(check_output(item["text"], prompt=item["prompt"]))


def scores(split: str) -> tuple[float, float]:
    items = [i for i in CORPUS if i["split"] == split]
    hits = [(flagged(i), i["label"] == "broken") for i in items]
    true_pos = sum(f and b for f, b in hits)
    return true_pos / max(sum(f for f, _ in hits), 1), true_pos / max(sum(b for _, b in hits), 1)


def test_the_corpus_is_cited_and_split_without_choosing():
    assert len(CORPUS) >= 30 and all(i["source"].startswith("https://github.com/") for i in CORPUS)
    assert {i["label"] for i in CORPUS} == {"broken", "good"} and {i["split"] for i in CORPUS} == {"tune", "test"}


def test_every_tune_item_is_classified_as_labelled():
    wrong = [i["id"] for i in CORPUS if i["split"] == "tune" and flagged(i) != (i["label"] == "broken")]
    assert wrong == []


def test_the_held_out_half_keeps_its_precision_and_recall():
    precision, recall = scores("test")
    assert precision >= 0.99 and recall >= 0.72  # measured 1.00 and 0.73 (8 of 11) when the thresholds were set


def test_each_check_names_its_issue():
    def issues(text, **kw):
        return {f.issue for f in check_output(text, **kw)}

    assert issues("") == {GuardIssue.EMPTY}
    assert issues("Paris.", finish_reason=None) == {GuardIssue.CUT}
    assert issues("Paris.", logprobs=[-0.1, math.nan]) == {GuardIssue.NON_FINITE}
    assert (
        issues("The capital of France is Paris, a city on the Seine.", prompt="What is the capital of France?") == set()
    )
    assert issues("巴黎是法国的首都，也是法国最大的城市。", prompt="What is the capital of France?") == {
        GuardIssue.LANGUAGE
    }


def test_a_load_tests_scope_keeps_only_what_no_workload_explains():
    loop = "the the the the the the the the the the the the the the the the the"
    assert GuardIssue.REPETITION in {f.issue for f in check_output(loop)}
    assert check_output(loop, scope=GuardScope.SYNTHETIC) == ()  # ignore_eos on word salad loops by design
    assert {f.issue for f in check_output("!" * 200, scope=GuardScope.SYNTHETIC)} == {GuardIssue.REPETITION}
    assert {f.issue for f in check_tokens([0] * 32, [math.nan] * 32)} == {GuardIssue.NON_FINITE, GuardIssue.REPETITION}


def test_a_summary_line_counts_answers_and_issues():
    summary = GuardSummary.of([check_output("fine answer."), check_output(""), check_output("!" * 40)])
    assert summary.line() == "guard: 2 of 3 answers look broken (empty 1, repetition 1)"
    assert GuardSummary.of([()]).line() == "guard: all 1 answers look sane"
