"""Accuracy reports written by the real verbs carry the provenance stamp and read back into `regress`."""

from __future__ import annotations

import json

from tests.unit.workbench.regress.conftest import fingerprint
from workbench.cli import main
from workbench.regress.results import RunKind, read_results


def test_compare_ops_report_is_stamped_and_regress_reads_it(tmp_path, capsys):
    report = tmp_path / "ops.json"
    assert main(["compare-ops", "--device", "cpu", "--op", "rms_norm", "--json", str(report)]) == 0
    document = json.loads(report.read_text())
    assert document["provenance"]["device"] == "cpu" and document["provenance"]["stack"]["versions"]
    (run,) = read_results(report)
    assert run.kind is RunKind.OP_SUITE and run.verdicts and set(run.verdicts.values()) <= {"pass", "warning", "error"}
    assert main(["baseline", "save", "--name", "ops", str(report)]) == 0
    capsys.readouterr()
    assert main(["regress", "--baseline", "ops", str(report)]) == 0
    assert "verdicts unchanged" in capsys.readouterr().out


def test_compare_dumps_report_reads_verdicts_per_module(tmp_path, capsys):
    def report(path, verdicts):
        rows = [{"key": k, "verdict": v, "cosine": 1.0} for k, v in verdicts.items()]
        path.write_text(json.dumps({"summary": {"compared": len(rows)}, "rows": rows, "provenance": fingerprint()}))
        return path

    base = report(tmp_path / "a.json", {"model.layers.0.mlp": "pass", "model.layers.1.mlp": "pass"})
    assert main(["baseline", "save", "--name", "dumps", str(base)]) == 0
    now = report(tmp_path / "b.json", {"model.layers.0.mlp": "pass", "model.layers.1.mlp": "warning"})
    capsys.readouterr()
    assert main(["regress", "--baseline", "dumps", str(now)]) == 1
    assert "model.layers.1.mlp: pass -> warning" in capsys.readouterr().out
    bad = report(tmp_path / "c.json", {"model.layers.0.mlp": "fine"})
    assert main(["regress", "--baseline", "dumps", str(bad)]) == 2
    assert "'fine' is not a valid Verdict" in capsys.readouterr().err
