"""Result files and figures: the JSON and CSV match the report, charts are built from the tables."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FIXTURES
from workbench.scan import charts
from workbench.scan.outputs import report_payload, write_csv, write_json
from workbench.scan.runner import ScanOptions, scan


@pytest.fixture(scope="module")
def report():
    return scan([FIXTURES / "scan_service"], ScanOptions(jobs=1))


def test_json_round_trip_keeps_every_finding_and_problem(tmp_path, report):
    path = write_json(report, tmp_path / "scan.json")
    payload = json.loads(path.read_text())
    assert payload["findings"] == [f.as_row() for f in report.findings]
    assert payload["summary"]["by_severity"] == report.severity_counts()
    from workbench.scan.placement import Tier

    by_file = payload["summary"]["by_file"]
    ranks = [Tier(row["tier"]).rank for row in by_file]
    assert ranks == sorted(ranks) and by_file[0]["tier"] == "engine"  # where it runs first, then most blockers
    build = [row["file"] for row in by_file if row["tier"] == "build"]
    assert build[0].endswith("CMakeLists.txt")


def test_rewriting_replaces_the_file_atomically(tmp_path, report):
    path = tmp_path / "scan.csv"
    path.write_text("old content\n")
    write_csv(report, path)
    assert path.read_text().startswith("# provenance: {")
    assert [p.name for p in tmp_path.iterdir()] == ["scan.csv"]


def test_payload_of_an_empty_scan(tmp_path):
    (tmp_path / "clean.py").write_text("import torch\nx = torch.ones(2)\n")
    empty = scan([tmp_path], ScanOptions(jobs=1))
    payload = report_payload(empty)
    assert payload["findings"] == [] and payload["summary"]["findings"] == 0
    assert payload["summary"]["by_severity"] == {"blocks": 0, "unknown": 0, "change": 0, "works": 0}
    assert "no findings" in charts.severity_by_category(empty.by_category()).layout.title.text


def test_charts_stack_severities_per_category_and_file(report):
    figure = charts.severity_by_category(report.by_category())
    assert [trace.name for trace in figure.data] == ["blocks", "unknown", "change", "works"]
    by_category = report.by_category().set_index("category")
    blocks = dict(zip(figure.data[0].y, figure.data[0].x))
    assert blocks == by_category["blocks"].to_dict()
    top = charts.top_files(report.by_file(), limit=5)
    assert len(top.data[0].y) == 5
