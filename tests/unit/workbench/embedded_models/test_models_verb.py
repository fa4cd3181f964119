"""`ascend-workbench models prepare|list`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench import cli


def test_prepare_tiny_prints_only_the_path_on_stdout(tiny_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["models", "prepare", "tiny"]) == 0
    captured = capsys.readouterr()
    assert captured.out == f"{tiny_dir}\n"
    assert "tiny: cached" in captured.err


def test_prepare_builds_into_an_empty_cache(tmp_path: Path, monkeypatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ASCEND_WORKBENCH_CACHE", str(tmp_path))
    assert cli.main(["models", "prepare", "tiny"]) == 0
    captured = capsys.readouterr()
    assert captured.out == f"{tmp_path / 'models' / 'tiny'}\n"
    assert "preparing tiny" in captured.err and "built in" in captured.err
    assert (tmp_path / "models" / "tiny" / "model.safetensors").is_file()


def test_list_reports_ready_and_missing(tiny_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["models", "list", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    by_name = {row["model"]: row for row in rows}
    assert set(by_name) == {"tiny", "smollm2", "smollm2-w8a8"}
    assert by_name["tiny"] == {**by_name["tiny"], "ready": True, "path": str(tiny_dir)}
    for name in ("smollm2", "smollm2-w8a8"):
        assert by_name[name]["path"] == str(tiny_dir.parent / name)
        assert by_name[name]["ready"] is False  # this test cache never holds either


def test_unknown_model_is_rejected_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["models", "prepare", "gpt5"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'gpt5'" in capsys.readouterr().err
