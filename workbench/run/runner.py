"""The main job: execute every notebook headless with papermill, keep executed copies and HTML.

Each run gets its own directory, `runs/notebooks/<UTC timestamp>/` (`settings.run_dir`), holding for each
notebook the executed `.ipynb` and its `.html`, plus `index.html` and `summary.json`: per notebook its
status, wall time, failing cell, the servers it started (configuration, seconds to ready) and its slowest
cells — where the run's time goes. The summary is rewritten after every notebook, so an interrupted run
still shows what finished. A failing notebook does not stop the others: the run reports every failure and
the caller exits non-zero.
"""

from __future__ import annotations

import html
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.results.envelope import DocumentKind
from workbench.results.files import write_json

RUN_KIND = DocumentKind("run")  # summary.json of the main job (the stack is in each notebook's results)

# A cell that runs longer than this fails its notebook (named with the cell) instead of blocking the run.
DEFAULT_CELL_TIMEOUT_S = 1800.0
HEADLESS_ENV = "ASCEND_WORKBENCH_HEADLESS"  # read by workbench.display.widgets in the kernel
STARTS_ENV = "ASCEND_WORKBENCH_SERVER_STARTS"  # workbench.settings.server_starts_file, in the kernels
STARTED_BY_ENV = "ASCEND_WORKBENCH_STARTED_BY"  # workbench.settings.started_by: the notebook running
SLOWEST_CELLS = 3


@dataclass(frozen=True)
class NotebookOutcome:
    notebook: str  # file name, e.g. "01_kernels.ipynb"
    ok: bool
    seconds: float
    executed: str  # path of the executed copy, relative to the run dir
    html: str | None
    failed_cell: int | None = None  # 0-based index into the notebook's cells
    error: str | None = None  # "ExceptionName: message"
    servers: tuple[dict[str, Any], ...] = ()  # the servers it started: recipe, configuration, ready_s, ...
    slowest_cells: tuple[dict[str, Any], ...] = ()  # {"cell": index, "seconds": ..., "source": first line}

    @property
    def server_seconds(self) -> float:
        return round(sum(s["ready_s"] for s in self.servers), 2)


@dataclass(frozen=True)
class RunReport:
    run_dir: Path
    outcomes: tuple[NotebookOutcome, ...]

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes)

    def failures(self) -> list[NotebookOutcome]:
        return [o for o in self.outcomes if not o.ok]


def discover(notebooks_dir: Path, only: Sequence[str] = ()) -> list[Path]:
    """Notebooks in name order (their numbers give the guided sequence); `only` filters by substring."""
    if not notebooks_dir.is_dir():
        raise WorkbenchError(f"notebook directory {notebooks_dir} does not exist; pass --notebooks DIR")
    found = sorted(p for p in notebooks_dir.glob("*.ipynb") if not p.name.startswith("."))
    if only:
        found = [p for p in found if any(pattern in p.name for pattern in only)]
    if not found:
        raise WorkbenchError(f"no notebooks to run in {notebooks_dir}" + (f" matching {list(only)}" if only else ""))
    return found


def run_notebooks(
    notebooks: Sequence[Path],
    run_dir: Path,
    parameters: dict[str, Any] | None = None,
    kernel_name: str = "python3",
    cwd: Path | None = None,
    progress: bool = True,
    cell_timeout_s: float | None = DEFAULT_CELL_TIMEOUT_S,
    jobs: int = 1,
) -> RunReport:
    """Execute `notebooks` into `run_dir`, `jobs` at a time; never raises for a failing or timed-out cell.

    The notebooks lease their servers from one engine pool (`workbench.serving.pool`): a configuration
    two notebooks start is started once. The pool is the caller's when one is open (a test session),
    else the run's own, stopped when the run ends.

    With `jobs` > 1 the notebooks run in that many lanes (each its own kernel), longest first by the last
    run's durations in the same runs folder (name order without one). Why: most of a notebook's time is a
    vLLM server starting or a kernel computing on one core, so on two cores two lanes overlap what one lane
    waits for. Outcomes are reported in name order whatever the lanes did.
    """
    import contextlib

    from workbench import settings
    from workbench.serving.pool import EnginePool

    if jobs < 1:
        raise WorkbenchError(f"--jobs {jobs}: give 1 or more notebooks to run at once")
    with contextlib.ExitStack() as stack:
        if settings.engine_pool_dir() is None:
            stack.enter_context(EnginePool.open(run_dir / "engine-pool"))
        lanes = _Lanes(run_dir, schedule(notebooks, run_dir.parent), jobs, progress)
        settings_ = _Execution(parameters or {}, kernel_name, cwd, cell_timeout_s)
        return lanes.run(settings_, stack)


@dataclass(frozen=True)
class _Execution:
    parameters: dict[str, Any]
    kernel_name: str
    cwd: Path | None
    cell_timeout_s: float | None


def schedule(notebooks: Sequence[Path], runs_root: Path) -> list[Path]:
    """Longest first by the newest earlier run under `runs_root` that timed them (unknown ones first, in name
    order, as the most likely to be long); name order when no earlier run is there."""
    seconds = _previous_seconds(runs_root)
    if not seconds:
        return list(notebooks)
    return sorted(notebooks, key=lambda p: (p.name in seconds, -seconds.get(p.name, 0.0), p.name))


def _previous_seconds(runs_root: Path) -> dict[str, float]:
    import json

    for summary in sorted(runs_root.glob("*/summary.json"), reverse=True):
        try:
            data = json.loads(summary.read_text(encoding="utf-8"))
            timed = {n["notebook"]: float(n["seconds"]) for n in data["notebooks"]}
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a run killed while writing, or an older layout: look further back
        if timed:
            return timed
    return {}


class _Lanes:
    """`jobs` threads taking the next notebook from one queue; one summary, rewritten under a lock."""

    def __init__(self, run_dir: Path, queue: list[Path], jobs: int, progress: bool) -> None:
        import os
        import threading

        from tqdm.auto import tqdm

        self.run_dir, self.queue, self.jobs = run_dir, list(queue), max(1, min(jobs, len(queue)))
        self.lock = threading.Lock()
        self.outcomes: dict[str, NotebookOutcome] = {}
        self.bar = tqdm(total=len(queue), desc="notebooks", unit="nb", disable=not progress)
        # every server start is recorded: into the test session's file when one is set, else the run's own
        self.starts = Path(os.environ.get(STARTS_ENV) or run_dir / "server-starts.jsonl")

    def run(self, execution: _Execution, stack) -> RunReport:
        import threading

        threads = []
        for lane in range(self.jobs):
            # the kernels' sockets: mode 0700, and a short path (Unix socket paths are limited to ~107 bytes);
            # one folder per lane, so two kernels starting at once never pick the same socket name
            sockets = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"wb-kernel{lane}-")))
            thread = threading.Thread(target=self._work, args=(execution, sockets), name=f"lane-{lane}")
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join()
        self.bar.close()
        return self._report()

    def _next(self) -> Path | None:
        with self.lock:
            return self.queue.pop(0) if self.queue else None

    def _work(self, execution: _Execution, sockets: Path) -> None:
        import os

        while (path := self._next()) is not None:
            # Kernels inherit this environment: widgets render their default view statically, and every server
            # start is recorded with the notebook that asked for it.
            env = dict(os.environ) | {HEADLESS_ENV: "1", STARTS_ENV: str(self.starts), STARTED_BY_ENV: path.name}
            env |= lane_threads(self.jobs, env)
            manager = _ipc_kernel_manager(sockets, env)
            outcome = _execute_one(path, self.run_dir, execution, manager)
            outcome = _with_timings(outcome, self.run_dir, self.starts)
            with self.lock:
                self.outcomes[path.name] = outcome
                _write_summary(self._report())
                self.bar.update(1)
                self.bar.set_postfix_str(path.name)

    def _report(self) -> RunReport:
        return RunReport(self.run_dir, tuple(self.outcomes[name] for name in sorted(self.outcomes)))


def lane_threads(jobs: int, env: dict[str, str]) -> dict[str, str]:
    """The thread cap for one lane's kernel: its share of this process's cores, unless OMP_NUM_THREADS is set.

    Why: torch sizes its thread pool to every core, so with two lanes on two cores each kernel's two threads
    wait on each other while the other lane's work holds a core. Measured here (7 Dec): the quantization
    autopilot took 198 s beside a two-thread load at two threads and 94 s at one (45 s alone at two).
    Servers a kernel starts drop the cap (`workbench.serving.launch_plan.server_environ`).
    """
    import os

    from workbench.serving.launch_plan import LANE_THREADS_VAR

    if jobs < 2 or "OMP_NUM_THREADS" in env:
        return {}
    threads = str(max(1, len(os.sched_getaffinity(0)) // jobs))
    return {"OMP_NUM_THREADS": threads, LANE_THREADS_VAR: threads}


def _with_timings(outcome: NotebookOutcome, run_dir: Path, starts: Path) -> NotebookOutcome:
    """The outcome with the servers its notebook started and its slowest cells."""
    from dataclasses import replace

    from workbench.serving.starts import read_starts

    servers = tuple(s.to_dict() for s in read_starts(starts) if s.started_by == outcome.notebook)
    return replace(outcome, servers=servers, slowest_cells=_slowest_cells(run_dir / outcome.executed))


def _slowest_cells(executed: Path, count: int = SLOWEST_CELLS) -> tuple[dict[str, Any], ...]:
    """The `count` longest code cells of an executed notebook (papermill records each cell's duration),
    indexed as in the source notebook."""
    import nbformat

    try:
        nb = nbformat.read(executed, as_version=4)
    except (OSError, ValueError):
        return ()
    timed = []
    source_index = -1
    for cell in nb.cells:
        if _ADDED_TAGS & set(cell.get("metadata", {}).get("tags", [])):
            continue
        source_index += 1
        seconds = cell.get("metadata", {}).get("papermill", {}).get("duration")
        if cell.cell_type == "code" and seconds is not None:
            first = next((line for line in cell.source.splitlines() if line.strip()), "")
            timed.append({"cell": source_index, "seconds": round(float(seconds), 2), "source": first[:80]})
    return tuple(sorted(timed, key=lambda c: -c["seconds"])[:count])


def _execute_one(path: Path, run_dir: Path, execution: _Execution, kernel_manager: type) -> NotebookOutcome:
    import papermill
    from nbclient.exceptions import CellTimeoutError

    executed = run_dir / path.name
    accepted = set(papermill.inspect_notebook(str(path)))
    params = {k: v for k, v in execution.parameters.items() if k in accepted}
    cell_timeout_s = execution.cell_timeout_s
    start = time.perf_counter()
    failed_cell: int | None = None
    error: str | None = None
    try:
        papermill.execute_notebook(
            str(path),
            str(executed),
            parameters=params,
            kernel_name=execution.kernel_name,
            cwd=str(execution.cwd or path.parent),
            progress_bar=False,
            log_output=False,
            execution_timeout=cell_timeout_s,
            kernel_manager_class=kernel_manager,
        )
    except papermill.PapermillExecutionError as exc:
        failed_cell = _failing_cell_index(executed, exc.exec_count)
        error = f"{exc.ename}: {exc.evalue}"
    except CellTimeoutError:
        failed_cell = _failing_cell_index(executed, None)  # nbclient leaves an error output on that cell
        error = (
            f"CellTimeoutError: the cell ran longer than {cell_timeout_s:g} s and was stopped "
            "(raise it with `ascend-workbench run --cell-timeout SECONDS`)"
        )
    seconds = time.perf_counter() - start
    html_name = _to_html(executed) if executed.exists() else None
    return NotebookOutcome(path.name, error is None, round(seconds, 2), executed.name, html_name, failed_cell, error)


def _ipc_kernel_manager(socket_dir: Path, env: dict[str, str]) -> type:
    """A kernel manager that talks to its kernel over Unix sockets in a private folder, not TCP, and starts it
    with `env` (not this process's environment, which two lanes would race to change).

    jupyter_client's default binds the kernel's five channels to TCP ports on 127.0.0.1, where any local
    user can reach them, and ipykernel warns about it once per notebook ("Kernel is running over TCP
    without encryption"). A socket in a folder only this user can open is not reachable that way, and the
    run's output carries no warning.
    """
    from jupyter_client.manager import AsyncKernelManager

    class IpcKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**{**kwargs, "transport": "ipc", "ip": str(socket_dir / "kernel")})

        async def _async_pre_start_kernel(self, **kw: Any):
            return await super()._async_pre_start_kernel(**{**kw, "env": dict(env)})

    return IpcKernelManager


# Cells papermill adds to the executed copy (an error banner, the injected parameters).
_ADDED_TAGS = {"papermill-error-cell-tag", "injected-parameters"}


def _failing_cell_index(executed: Path, exec_count: int | None) -> int | None:
    """Index, in the *source* notebook, of the cell that raised.

    Papermill adds cells to the executed copy (an error banner at the top, the injected-parameters
    cell); they are skipped so the number matches what the user sees when opening the notebook.
    """
    import nbformat

    try:
        nb = nbformat.read(executed, as_version=4)
    except (OSError, ValueError):
        return None
    source_index = -1
    for cell in nb.cells:
        if _ADDED_TAGS & set(cell.get("metadata", {}).get("tags", [])):
            continue
        source_index += 1
        if cell.cell_type != "code":
            continue
        if any(out.get("output_type") == "error" for out in cell.get("outputs", [])):
            return source_index
        if exec_count is not None and cell.get("execution_count") == exec_count:
            return source_index
    return None


def _to_html(executed: Path) -> str:
    from workbench.run.html import notebook_to_html

    return notebook_to_html(executed).name


def _write_summary(report: RunReport) -> None:
    data = RUN_KIND.stamp() | {
        "ok": report.ok,
        "seconds": round(sum(o.seconds for o in report.outcomes), 2),
        "server_starts": sum(len(o.servers) for o in report.outcomes),
        "server_seconds": round(sum(o.server_seconds for o in report.outcomes), 2),
        "notebooks": [asdict(o) | {"server_seconds": o.server_seconds} for o in report.outcomes],
    }
    write_json(report.run_dir / "summary.json", data)
    (report.run_dir / "index.html").write_text(_index_html(report), encoding="utf-8")


def _index_html(report: RunReport) -> str:
    rows = []
    for o in report.outcomes:
        status = "passed" if o.ok else "FAILED"
        colour = "#1a7f37" if o.ok else "#cf222e"
        link = f'<a href="{html.escape(o.html)}">{html.escape(o.notebook)}</a>' if o.html else html.escape(o.notebook)
        detail = "" if o.ok else html.escape(f"cell {o.failed_cell}: {o.error}")
        servers = "<br>".join(
            html.escape(f"{s['recipe']} TP={s['tensor_parallel_size']} [{s['configuration']}]: {s['ready_s']:.1f} s")
            for s in o.servers
        )
        cells = "<br>".join(
            html.escape(f"cell {c['cell']}: {c['seconds']:.1f} s  {c['source']}") for c in o.slowest_cells
        )
        rows.append(
            f"<tr><td>{link}</td><td style='color:{colour};font-weight:bold'>{status}</td>"
            f"<td>{o.seconds:.1f} s</td><td>{servers}</td><td><code>{cells}</code></td><td>{detail}</td>"
            f"<td><a href='{html.escape(o.executed)}'>ipynb</a></td></tr>"
        )
    verdict = "all notebooks passed" if report.ok else f"{len(report.failures())} notebook(s) failed"
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Ascend Porting Workbench run</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:4px 12px;text-align:left}"
        "tr:nth-child(even){background:#f6f8fa}</style></head><body>"
        f"<h1>Ascend Porting Workbench — run {html.escape(report.run_dir.name)}</h1><p>{verdict}</p>"
        f"<p>{sum(o.seconds for o in report.outcomes):.0f} s of notebooks; "
        f"{sum(len(o.servers) for o in report.outcomes)} server starts took "
        f"{sum(o.server_seconds for o in report.outcomes):.0f} s of it</p>"
        "<table><tr><th>notebook</th><th>status</th><th>time</th><th>servers started (seconds to ready)</th>"
        "<th>slowest cells</th><th>failure</th><th>source</th></tr>" + "".join(rows) + "</table></body></html>"
    )
