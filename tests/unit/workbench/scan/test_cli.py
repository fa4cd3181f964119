"""`ascend-workbench scan` on the sample service: summary, JSON and CSV with provenance, exit codes."""

from __future__ import annotations

import json

from tests.conftest import FIXTURES
from tests.unit.workbench.scan.test_fixture_service import EXPECTED
from workbench.cli import main
from workbench.scan.outputs import read_findings_csv

SERVICE = FIXTURES / "scan_service"


def test_scan_writes_json_and_csv_and_exits_0(tmp_path, capsys):
    out_json, out_csv = tmp_path / "out" / "scan.json", tmp_path / "out" / "scan.csv"
    code = main(["scan", str(SERVICE), "--json", str(out_json), "--csv", str(out_csv), "--no-progress", "--jobs", "1"])
    printed = capsys.readouterr().out
    assert code == 0
    payload = json.loads(out_json.read_text())
    assert set(payload) == {"provenance", "scan", "summary", "findings", "problems"}
    assert payload["provenance"]["stack"]["python"]
    assert payload["scan"]["paths"] == [str(SERVICE)] and payload["scan"]["complete"] is True
    assert payload["summary"]["findings"] == len(payload["findings"]) == sum(len(v) for v in EXPECTED.values())
    assert payload["summary"]["files_scanned"] == 17
    first = payload["findings"][0]
    assert set(first) == {
        "tier",
        "file",
        "line",
        "column",
        "rule",
        "category",
        "severity",
        "excerpt",
        "detail",
        "counterpart",
        "verify",
    }
    provenance, rows = read_findings_csv(out_csv)
    assert provenance["stack"] == payload["provenance"]["stack"]
    assert [r["rule"] for r in rows] == [f["rule"] for f in payload["findings"]]
    assert {p.name for p in out_json.parent.iterdir()} == {"scan.json", "scan.csv"}  # no temporary files left
    assert "By category:" in printed and "By rule" in printed and "By file" in printed
    assert f"json: {out_json}" in printed and f"csv: {out_csv}" in printed


def test_list_prints_every_finding(capsys):
    assert main(["scan", str(SERVICE / "csrc"), "--list", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "fused_norm.cu:5  [blocks] native.cuda_source" in out
    assert "ops.cpp:9  [change] ext.cuda_dispatch" in out


def test_a_path_that_does_not_exist_exits_2_naming_it(tmp_path, capsys):
    missing = tmp_path / "nope"
    assert main(["scan", str(SERVICE), str(missing), "--no-progress"]) == 2
    assert f"path '{missing}' does not exist" in capsys.readouterr().err


def test_bad_options_exit_2(tmp_path, capsys):
    assert main(["scan", str(SERVICE), "--jobs", "-1", "--no-progress"]) == 2
    assert "jobs must be 0" in capsys.readouterr().err
    assert main(["scan", str(SERVICE), "--max-file-mb", "0", "--no-progress"]) == 2
    assert "--max-file-mb must be positive" in capsys.readouterr().err
    assert main(["scan", str(SERVICE), "--mapping", str(tmp_path / "m.yaml"), "--no-progress"]) == 2
    assert "scan mapping" in capsys.readouterr().err


def test_an_unwritable_output_exits_2(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert main(["scan", str(SERVICE / "setup.py"), "--json", str(blocker / "scan.json"), "--no-progress"]) == 2
    assert "cannot write the scan result" in capsys.readouterr().err


def test_the_scan_runs_in_a_fresh_process_through_the_console_script(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "s.json"
    done = subprocess.run(
        [sys.executable, "-m", "workbench.cli", "scan", str(SERVICE / "scripts"), "--json", str(out), "--no-progress"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert {f["rule"] for f in json.loads(out.read_text())["findings"]} >= {"tool.nvidia_smi", "docker.gpu_runtime"}


def test_an_interrupted_scan_still_writes_what_it_scanned(tmp_path, capsys, monkeypatch):
    from workbench.scan import runner

    real = runner.scan_chunk
    calls = []

    def interrupted_after_one(chunk, settings):
        if calls:
            raise KeyboardInterrupt
        calls.append(chunk)
        return real(chunk, settings)

    monkeypatch.setattr(runner, "scan_chunk", interrupted_after_one)
    monkeypatch.setattr(runner, "_CHUNK_FILES", 2)
    out = tmp_path / "partial.json"
    assert main(["scan", str(SERVICE), "--json", str(out), "--jobs", "1", "--no-progress"]) == 130
    payload = json.loads(out.read_text())
    assert payload["scan"]["complete"] is False and payload["summary"]["files_scanned"] == 2
    scanned = {c.path for c in calls[0]}
    assert payload["findings"] and {f["file"] for f in payload["findings"]} <= scanned
    assert "interrupted: partial" in capsys.readouterr().out
