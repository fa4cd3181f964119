"""Accuracy reports written by the real verbs carry the provenance stamp and read back into `regress`."""

from __future__ import annotations

import json

import pytest

from tests.unit.workbench.regress.conftest import fingerprint
from workbench.cli import main
from workbench.errors import WorkbenchError
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


def test_regress_reads_by_kind_not_by_keys(tmp_path):
    """A stamped document is read by its kind, a kind regress does not compare is named, a newer layout is
    refused; an unstamped file of the same content still reads (written before kinds existed)."""
    rows = [{"key": "model.layers.0.mlp", "verdict": "pass"}]
    stamped = tmp_path / "stamped.json"
    stamped.write_text(json.dumps({"kind": "dump-compare", "schema_version": 1, "rows": rows}))
    (run,) = read_results(stamped)
    assert run.kind is RunKind.DUMP_COMPARE and run.verdicts == {"model.layers.0.mlp": "pass"}
    # the same keys under another kind are not guessed at
    twin = tmp_path / "twin.json"
    twin.write_text(json.dumps({"kind": "twin", "schema_version": 1, "rows": rows, "summary": {}, "workload": {}}))
    with pytest.raises(WorkbenchError, match="a 'twin' result, which regress does not compare"):
        read_results(twin)
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"kind": "dump-compare", "schema_version": 99, "rows": rows}))
    with pytest.raises(WorkbenchError, match="schema version 99 is newer"):
        read_results(newer)
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"rows": rows}))
    assert read_results(old)[0].kind is RunKind.DUMP_COMPARE


def test_sweep_points_are_stamped_and_read_by_kind(tmp_path):
    from workbench.sweep.store import PointResult, PointStatus

    point = PointResult("p0", "s", "k", {"max_num_seqs": 4}, {"input_len": 8, "output_len": 4}, 0, PointStatus.OK)
    data = point.to_dict()
    assert (data["kind"], data["schema_version"]) == ("sweep-point", 1)
    assert PointResult.from_dict(data) == point
    log = tmp_path / "results.jsonl"
    other = {"kind": "bench", "schema_version": 1, "point_id": "x", "workload": {}, "summary": {}}
    log.write_text(json.dumps(data) + "\n" + json.dumps(other) + "\n")
    (run,) = read_results(log)  # the bench line is not a sweep point, whatever its keys
    assert run.kind is RunKind.SWEEP_POINT and run.source.endswith("[p0]")
