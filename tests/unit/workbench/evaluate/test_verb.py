"""`ascend-workbench evaluate` user errors: one line naming the thing and the fix, exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.cli import main
from workbench.serving.server import free_port


def run_cli(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str]:
    code = main(["evaluate", *argv, "--no-progress"])
    return code, capsys.readouterr().err.strip()


def test_a_url_where_nothing_listens(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    code, err = run_cli(capsys, "--url", url, "--dataset", "text", "--out", str(tmp_path / "out"))
    assert code == 2 and "\n" not in err
    assert err.startswith(f"ascend-workbench evaluate: --url {url}: nothing answers there")
    assert "ascend-workbench serve --recipe" in err and "--recipe" in err
    assert not (tmp_path / "out").exists()


def test_a_malformed_data_set_fails_before_any_server_is_asked(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "fine"}\n{"prompt": 3}\n')
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens: the data-set error must come first
    code, err = run_cli(capsys, "--url", url, "--dataset", "text", str(bad))
    assert code == 2 and "\n" not in err
    assert f"{bad}, line 2: prompt: Input should be a valid string" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--dataset", "humaneva"], "did you mean 'humaneval'"),
        (["--dataset", "text", "--measures", "nll,bleu"], "--measures 'nll,bleu': choose from nll, greedy, pass1"),
        (["--dataset", "text", "--limit", "0"], "--limit 0"),
        (["--dataset", "text", "--reference", "/nonexistent/run"], "/nonexistent/run: no such evaluate run directory"),
        (["--dataset", "text", "--thresholds", "nope"], "evaluate thresholds file 'nope' not found"),
    ],
)
def test_bad_arguments(capsys: pytest.CaptureFixture, extra: list[str], message: str) -> None:
    code, err = run_cli(capsys, "--url", f"http://127.0.0.1:{free_port()}", *extra)
    assert code == 2 and "\n" not in err and message in err
