"""The measurement of issue #31: real public crash logs triaged to the right family with the right fix.

Each fixture of tests/fixtures/triage (SOURCES.md says where each was posted) has its expected family,
code, operator, first failing place and words the right fix must contain (expected.yaml). The corpus
passes when at least 90% are triaged to the right family with a fix that says those words, and none
comes out as a bare "unknown" (an unknown family without a code).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.conftest import FIXTURES
from workbench.triage.kinds import FailureKind
from workbench.triage.report import triage_paths

CORPUS = FIXTURES / "triage"
EXPECTED = yaml.safe_load((CORPUS / "expected.yaml").read_text(encoding="utf-8"))["fixtures"]
TARGET_SHARE = 0.90


def _first(name: str):
    report = triage_paths([CORPUS / name])
    assert report.first is not None, f"{name}: no error found"
    return report.first


def _right(name: str, expected: dict) -> bool:
    diagnosis = _first(name).diagnosis
    fix = diagnosis.fix.lower()
    return diagnosis.kind.value == expected["family"] and all(w.lower() in fix for w in expected["fix_mentions"])


def shares_by_family() -> dict[str, tuple[int, int]]:
    """{family: (right, total)} over the corpus (the figure the issue asks to report)."""
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for name, expected in EXPECTED.items():
        total[expected["family"]] += 1
        right[expected["family"]] += _right(name, expected)
    return {family: (right[family], total[family]) for family in sorted(total)}


def test_the_corpus_is_real_and_large_enough():
    on_disk = {p.name for p in CORPUS.iterdir() if p.name not in ("SOURCES.md", "expected.yaml")}
    assert on_disk == set(EXPECTED), "every fixture has an expectation and every expectation a fixture"
    sources = (CORPUS / "SOURCES.md").read_text(encoding="utf-8")
    assert all(f"`{name}" in sources for name in EXPECTED), "every fixture is cited in SOURCES.md"
    from_vllm_ascend_issues = [n for n in EXPECTED if n.startswith("va")]
    assert len(from_vllm_ascend_issues) >= 25


def test_at_least_90_percent_right_family_with_right_fix_and_no_bare_unknown():
    shares = shares_by_family()
    right = sum(r for r, _ in shares.values())
    total = sum(t for _, t in shares.values())
    assert right / total >= TARGET_SHARE, shares
    for name in EXPECTED:
        diagnosis = _first(name).diagnosis
        assert not (diagnosis.kind is FailureKind.UNKNOWN and diagnosis.code is None), f"{name}: bare unknown"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_fixture_names_code_operator_and_place(name):
    expected = EXPECTED[name]
    first = _first(name)
    assert first.diagnosis.kind.value == expected["family"]
    assert (str(first.diagnosis.code) if first.diagnosis.code else None) == expected["code"]
    if "operator" in expected:
        assert expected["operator"] in first.block.operators
    place = first.block.place
    for key, value in expected["place"].items():
        assert getattr(place, key) == value, f"{name}: {key}"
    assert first.diagnosis.verify.startswith(("ascend-workbench", "change "))
    assert first.diagnosis.cites and all(c.startswith("https://") for c in first.diagnosis.cites)


def test_the_whole_corpus_at_once_orders_events_and_reads_every_file():
    report = triage_paths([CORPUS])
    assert report.problems == ()
    assert {Path(f.path).name for f in report.inputs} >= {n for n in EXPECTED if n.endswith(".log")}
    times = [e.when for e in report.events if e.when is not None]
    assert times == sorted(times)
