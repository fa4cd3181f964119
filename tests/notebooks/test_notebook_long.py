"""The notebooks' long experiments, one parameter away from their defaults (`make test-long`).

The main job runs each notebook's smaller default (docs/ARCHITECTURE.md: the main job stays under eight
minutes); these run the full experiment through the same runner and check what it saved.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.notebooks.test_notebook_results import check_autopilot_plan
from workbench.embedded_models.catalog import prepare

pytestmark = [pytest.mark.notebooks, pytest.mark.long]


def run_one(notebook: str, parameters: dict, tmp_path: Path, monkeypatch) -> Path:
    """Run one notebook with `parameters` into a private runs folder; the folder its kernel wrote to."""
    from workbench.run.runner import run_notebooks

    runs = tmp_path / "runs"
    monkeypatch.setenv("ASCEND_WORKBENCH_RUNS", str(runs))
    monkeypatch.setenv("ASCEND_WORKBENCH_DATA", str(tmp_path / "data"))
    report = run_notebooks(
        [REPO_ROOT / "notebooks" / notebook],
        runs / "notebooks" / "long",
        parameters,
        cwd=REPO_ROOT,
        progress=False,
        cell_timeout_s=1800,
    )
    (outcome,) = report.outcomes
    assert outcome.ok, f"{notebook} failed at cell {outcome.failed_cell}: {outcome.error}"
    return runs


def test_quantization_notebook_serves_float_all_int8_and_the_plan(tmp_path, monkeypatch):
    """Notebook 10 with serve = True: the plan served beside float and all-int8 (three SmolLM2 servers)."""
    runs = run_one("10_quantize.ipynb", {"serve": True}, tmp_path, monkeypatch)
    (state,) = runs.glob("quantization/*/autopilot/plan.json")
    check_autopilot_plan(json.loads(state.read_text()))
    served = json.loads((state.parent / "served.json").read_text())
    assert served["kind"] == "quantize-served"
    rows = served["rows"]
    assert [r["configuration"] for r in rows] == ["float", "all-int8", "plan"]
    assert all(r["failed_requests"] == 0 and r["output_tok_s"] > 0 for r in rows)
    # a working int8 path stays within a few percent of float's held-out NLL; a wrong scale costs whole nats
    assert all(abs(r["held_out_rise_pct"]) < 15 for r in rows), rows
    logs = list(runs.glob("server-logs/cpu-smollm2-w8a8-*.log"))
    assert any("CompressedTensorsW8A8Int8" in log.read_text(errors="replace") for log in logs)
    config = json.loads((prepare("smollm2-w8a8") / "config.json").read_text())  # what the int8 recipe served
    assert config["quantization_config"]["config_groups"]["group_0"]["input_activations"]["dynamic"]
