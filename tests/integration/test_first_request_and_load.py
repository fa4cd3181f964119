"""Smoke checks, the CLI verbs and a 64-request load run against the shared tiny server."""

from __future__ import annotations

import json

import pytest

from workbench.cli import main
from workbench.serving.load.runner import run_load
from workbench.serving.load.workload import Workload
from workbench.serving.smoke import CheckOutcome, run_smoke

pytestmark = pytest.mark.integration


def test_smoke_passes(tiny_server):
    report = run_smoke(tiny_server, max_tokens=16)
    assert report.passed, report.summary()
    assert [c.name for c in report.checks] == ["models", "chat", "stream"]
    assert all(c.outcome is CheckOutcome.PASS for c in report.checks)
    assert report.answer.strip() and report.diagnosis is None
    frame = report.to_frame()
    assert list(frame["verdict"]) == ["pass"] * 3


def test_smoke_expectation_is_judged(tiny_server):
    # The tiny model has random weights: it will not say this.
    report = run_smoke(tiny_server, max_tokens=8, expect="zzzz-not-in-any-answer")
    assert not report.passed and report.checks[-1].name == "expect"
    assert report.checks[-1].outcome is CheckOutcome.FAIL and report.diagnosis is None


def test_load_64_requests_exact_lengths(tiny_server):
    workload = Workload(input_len=32, output_len=16, num_prompts=64, concurrency=16)
    result = run_load(tiny_server.url, tiny_server.model, workload, progress=False)
    s = result.summary
    assert s.sent == 64 and s.completed + s.failed == s.sent and s.failed == 0
    assert all(r.prompt_tokens == 32 and r.output_tokens == 16 for r in result.records)  # as the server counted
    assert s.total_output_tokens == 64 * 16
    assert 0 < s.ttft_ms["median"] <= s.e2el_ms["median"]
    assert s.output_throughput > 0 and len(result.to_frame()) == 64
    assert (
        result.provenance["server_vllm_version"] and result.provenance["stack"]["versions"]["torch"]
    )  # the provenance stamp


def test_cli_smoke_and_bench(tiny_server, tmp_path):
    assert main(["smoke", "--url", tiny_server.url, "--max-tokens", "8", "--json", str(tmp_path / "smoke.json")]) == 0
    assert json.loads((tmp_path / "smoke.json").read_text())["passed"] is True
    out = tmp_path / "bench.json"
    code = main(
        [
            "bench",
            "--url",
            tiny_server.url,
            "--input-len",
            "24",
            "--output-len",
            "8",
            "--num-prompts",
            "8",
            "--request-rate",
            "20",
            "--burstiness",
            "0.5",
            "--goodput",
            "ttft:60000",
            "--json",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    data = json.loads(out.read_text())
    assert data["summary"]["sent"] == 8 and data["summary"]["request_goodput"] > 0
    assert data["workload"]["burstiness"] == 0.5 and len(data["requests"]) == 8
    assert len(out.with_suffix(".requests.jsonl").read_text().splitlines()) == 8
