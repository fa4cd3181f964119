"""Real serving commands from vllm-ascend's public issues, judged at the release each user ran.

Each fixture in tests/fixtures/lint/commands/ was written by reading vllm-ascend's (and vLLM's) source at
that tag, independently of the table the lint uses (the README there says how). Every expected finding
must come out, at the fixture's release and, where given, at the `--to` release; the few the lint cannot
give are listed below with the reason, so a new gap fails instead of hiding.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from workbench.lint.api import lint_parsed
from workbench.lint.command import parse_text

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "lint" / "commands"
FILES = sorted(FIXTURES.glob("*.yaml"))

# (fixture, release, setting) -> why the lint does not give the expected class
KNOWN_GAPS = {
    ("v0230rc1-unexported-and-duplicate-env.yaml", "v0.23.0rc1", "additional_config.enable_sparse_sfa_c8"): (
        "rewritten to False unless the model has sparse attention (index_topk in its config): the model's "
        "config is not in the command, so the lint says ok"
    ),
    ("v0230rc1-unexported-and-duplicate-env.yaml", "v0.23.0rc1", "additional_config.enable_sparse_li_c8"): (
        "same model condition as enable_sparse_sfa_c8"
    ),
}


def _cases():
    for path in FILES:
        fixture = yaml.safe_load(path.read_text(encoding="utf-8"))
        yield pytest.param(path.name, fixture["release"], fixture.get("expected", []), id=f"{path.stem}")
        target = fixture.get("expected_at_target")
        if target:
            yield pytest.param(path.name, target["release"], target["findings"], id=f"{path.stem}@{target['release']}")


def _covering(report, expected):
    setting = expected["setting"]
    found = [f for f in report.findings if f.setting == setting or setting.startswith(f.setting + ".")]
    return [f.finding.value for f in found]


def test_the_corpus_is_there():
    assert len(FILES) >= 10, "the issue asks for at least ten real commands"
    issues = {yaml.safe_load(p.read_text())["issue"] for p in FILES}
    assert len(issues) >= 10


@pytest.mark.parametrize(("name", "release", "expected"), list(_cases()))
def test_expected_findings(name, release, expected):
    fixture = yaml.safe_load((FIXTURES / name).read_text(encoding="utf-8"))
    report = lint_parsed(parse_text(fixture["command"], name), release=release)
    assert report.target.basis, "every lint says why it judged this release"
    missing = []
    for item in expected:
        got = _covering(report, item)
        if item["finding"] in got:
            continue
        gap = KNOWN_GAPS.get((name, release, item["setting"]))
        if gap is None:
            missing.append(f"{item['setting']}: expected {item['finding']}, got {got or 'nothing'}")
    assert missing == []


def test_no_false_unknown_for_names_the_table_knows():
    """A setting the fixtures expect to be read (ok), foreign, dead or renamed is never called unknown."""
    wrong = []
    for name, release, expected in (c.values for c in _cases()):
        fixture = yaml.safe_load((FIXTURES / name).read_text(encoding="utf-8"))
        report = lint_parsed(parse_text(fixture["command"], name), release=release)
        for item in expected:
            if item["finding"] in ("unknown", "rejected"):
                continue
            if "unknown" in _covering(report, item):
                wrong.append(f"{name}@{release}: {item['setting']} (expected {item['finding']})")
    assert wrong == []


def test_known_gaps_are_still_gaps():
    """A gap listed above that the lint has closed must be removed from the list."""
    for (name, release, setting), _ in KNOWN_GAPS.items():
        fixture = yaml.safe_load((FIXTURES / name).read_text(encoding="utf-8"))
        expected = next(e for e in fixture["expected"] if e["setting"] == setting)
        report = lint_parsed(parse_text(fixture["command"], name), release=release)
        assert expected["finding"] not in _covering(report, expected), f"{setting} now passes: drop it from KNOWN_GAPS"
