"""`ascend-workbench run`: executed copies, HTML, index.html, and a clear failure naming notebook and cell."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import FIXTURES
from workbench.cli import main


def test_run_reports_the_failing_notebook_and_cell(tmp_path, capsys):
    code = main(["run", "--notebooks", str(FIXTURES / "notebooks"), "--out", str(tmp_path), "-p", "value=21"])
    assert code == 1
    (run_dir,) = (tmp_path / "notebooks").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    by_name = {n["notebook"]: n for n in summary["notebooks"]}
    assert by_name["0_good.ipynb"]["ok"] is True
    bad = by_name["1_bad.ipynb"]
    assert (
        bad["ok"] is False and bad["failed_cell"] == 2
    )  # markdown 0, parameters 1, failing cell 2 (as in the notebook under test)
    assert "broken with value=21" in bad["error"]
    for name in ("0_good.ipynb", "0_good.html", "1_bad.ipynb", "1_bad.html", "index.html"):
        assert (run_dir / name).is_file(), name
    index = (run_dir / "index.html").read_text()
    assert "FAILED" in index and "0_good.html" in index
    err = capsys.readouterr().err
    assert "1_bad.ipynb (cell 2)" in err


def test_run_only_filter_and_success_exit(tmp_path):
    assert main(["run", "--notebooks", str(FIXTURES / "notebooks"), "--out", str(tmp_path), "--only", "good"]) == 0


@pytest.mark.parametrize(
    "argv,message",
    [
        (["run", "--notebooks", "/nonexistent/dir"], "does not exist"),
        (["run", "--notebooks", str(FIXTURES / "notebooks"), "--only", "zzz"], "no notebooks to run"),
        (["run", "--notebooks", str(FIXTURES / "notebooks"), "-p", "novalue"], "expected NAME=VALUE"),
    ],
)
def test_user_errors_are_one_clear_line(tmp_path, capsys, argv, message):
    assert main(argv + ["--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def _notebook(path, *sources):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell("# fixture")]
    params = nbformat.v4.new_code_cell("value = 1")
    params.metadata["tags"] = ["parameters"]
    nb.cells.append(params)
    nb.cells.extend(nbformat.v4.new_code_cell(source) for source in sources)
    nbformat.write(nb, path)


def test_a_cell_that_hangs_fails_its_notebook_at_that_cell_and_the_run_goes_on(tmp_path, capsys):
    notebooks = tmp_path / "nbs"
    notebooks.mkdir()
    _notebook(notebooks / "0_hangs.ipynb", "import time\ntime.sleep(120)", "print('never')")
    _notebook(notebooks / "1_headless.ipynb", "import os\nassert os.environ.get('ASCEND_WORKBENCH_HEADLESS') == '1'")
    code = main(["run", "--notebooks", str(notebooks), "--out", str(tmp_path / "runs"), "--cell-timeout", "4"])
    assert code == 1
    (run_dir,) = (tmp_path / "runs" / "notebooks").iterdir()
    by_name = {n["notebook"]: n for n in json.loads((run_dir / "summary.json").read_text())["notebooks"]}
    hung = by_name["0_hangs.ipynb"]
    assert hung["ok"] is False and hung["failed_cell"] == 2
    assert "CellTimeoutError" in hung["error"] and "--cell-timeout" in hung["error"]
    assert by_name["1_headless.ipynb"]["ok"] is True  # the next notebook still ran, headless
    assert "0_hangs.ipynb (cell 2)" in capsys.readouterr().err


def test_negative_cell_timeout_is_refused(tmp_path, capsys):
    assert (
        main(["run", "--notebooks", str(FIXTURES / "notebooks"), "--out", str(tmp_path), "--cell-timeout", "-5"]) == 2
    )
    assert "--cell-timeout -5" in capsys.readouterr().err


def test_the_report_shows_each_notebooks_servers_and_slowest_cells(tmp_path, monkeypatch):
    """A server start recorded inside a kernel is attributed to its notebook; cells come out slowest first."""
    monkeypatch.delenv("ASCEND_WORKBENCH_SERVER_STARTS", raising=False)  # the run's own file, not a session's
    notebooks = tmp_path / "nbs"
    notebooks.mkdir()
    record = "from workbench.serving.starts import record_start\nrecord_start('cpu-tiny', 'abc123', 12.5, 2, False)"
    _notebook(notebooks / "0_starts.ipynb", "import time\ntime.sleep(1.2)", record, "x = 1")
    _notebook(notebooks / "1_quiet.ipynb", "y = 2")
    assert main(["run", "--notebooks", str(notebooks), "--out", str(tmp_path / "runs")]) == 0
    (run_dir,) = (tmp_path / "runs" / "notebooks").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    by_name = {n["notebook"]: n for n in summary["notebooks"]}
    (server,) = by_name["0_starts.ipynb"]["servers"]
    assert (server["recipe"], server["configuration"], server["ready_s"]) == ("cpu-tiny", "abc123", 12.5)
    assert server["started_by"] == "0_starts.ipynb" and server["tensor_parallel_size"] == 2
    assert by_name["1_quiet.ipynb"]["servers"] == []
    slowest = by_name["0_starts.ipynb"]["slowest_cells"]
    assert slowest[0]["cell"] == 2 and slowest[0]["seconds"] >= 1.2 and slowest[0]["source"] == "import time"
    assert [c["seconds"] for c in slowest] == sorted((c["seconds"] for c in slowest), reverse=True)
    assert (summary["server_starts"], summary["server_seconds"]) == (1, 12.5)
    index = (run_dir / "index.html").read_text()
    assert "cpu-tiny TP=2 [abc123]: 12.5 s" in index and "1 server starts took 12 s" in index


def test_two_lanes_run_notebooks_side_by_side_each_with_its_own_name(tmp_path, monkeypatch):
    """With --jobs 2 two kernels run at once (their papermill windows overlap), each starting with its own
    notebook's name in ASCEND_WORKBENCH_STARTED_BY (set per kernel, never raced through os.environ) and torch
    sized to half the cores."""
    import nbformat

    monkeypatch.delenv("ASCEND_WORKBENCH_SERVER_STARTS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # the lanes pick each kernel's share of the cores
    notebooks = tmp_path / "nbs"
    notebooks.mkdir()
    wait = "import pathlib, time\nme = pathlib.Path('{}')\nme.touch()\nt = time.time()\nwhile not pathlib.Path('{}').exists() and time.time() - t < 60: time.sleep(0.1)\nassert pathlib.Path('{}').exists()"
    a, b = tmp_path / "a.flag", tmp_path / "b.flag"
    share = max(1, len(os.sched_getaffinity(0)) // 2)
    check = (
        "import os, torch\nassert os.environ['ASCEND_WORKBENCH_STARTED_BY'] == '{}'\n"
        f"assert torch.get_num_threads() == {share}, torch.get_num_threads()"
    )
    _notebook(notebooks / "0_a.ipynb", check.format("0_a.ipynb"), wait.format(a, b, b))
    _notebook(notebooks / "1_b.ipynb", check.format("1_b.ipynb"), wait.format(b, a, a))
    assert main(["run", "--notebooks", str(notebooks), "--out", str(tmp_path / "runs"), "--jobs", "2"]) == 0
    (run_dir,) = (tmp_path / "runs" / "notebooks").iterdir()
    windows = [nbformat.read(run_dir / n, as_version=4).metadata["papermill"] for n in ("0_a.ipynb", "1_b.ipynb")]
    assert windows[0]["start_time"] < windows[1]["end_time"] and windows[1]["start_time"] < windows[0]["end_time"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["kind"] == "run" and [n["notebook"] for n in summary["notebooks"]] == ["0_a.ipynb", "1_b.ipynb"]


def test_the_schedule_puts_the_longest_first_by_the_last_run(tmp_path):
    from workbench.run.runner import schedule

    paths = [tmp_path / f"{i}_n.ipynb" for i in range(4)]
    assert schedule(paths, tmp_path / "runs") == paths  # no earlier run: name order
    earlier = tmp_path / "runs" / "20261201T000000Z"
    earlier.mkdir(parents=True)
    seconds = {"0_n.ipynb": 5.0, "1_n.ipynb": 50.0, "2_n.ipynb": 20.0}  # 3_n is new: it goes first
    rows = [{"notebook": name, "seconds": s} for name, s in seconds.items()]
    (earlier / "summary.json").write_text(json.dumps({"notebooks": rows}))
    (tmp_path / "runs" / "20261202T000000Z").mkdir()  # a newer run killed before its summary: skipped
    assert [p.name for p in schedule(paths, tmp_path / "runs")] == ["3_n.ipynb", "1_n.ipynb", "2_n.ipynb", "0_n.ipynb"]


def test_jobs_must_be_positive(tmp_path, capsys):
    assert main(["run", "--notebooks", str(FIXTURES / "notebooks"), "--out", str(tmp_path), "--jobs", "0"]) == 2
    assert "--jobs 0: give 1 or more" in capsys.readouterr().err
