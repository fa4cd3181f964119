"""The failure that leaves no log: a server that takes requests and never finishes them.

On an NPU a collective waiting for a rank that faulted, or a stream synchronisation waiting for a kernel
that will not end, blocks the engine without a word until HCCL's execution timeout fires (1800 s by
default, policy/triage/error_codes.yaml EI0002) — half an hour of a load test or a sweep spent waiting,
then an error whose cause is on another rank. The server's own `/metrics` shows the state long before:
requests in the running batch, and neither the token counters nor the engine-step count moving
(docs/METHOD.md §9: look at the evidence first, then raise one log level).

`HangWatchdog` polls `/metrics` in a thread and judges each reading with a `StallClock`: the engine is
*busy* when the client has requests in flight (or, with no client, when the server says it runs some),
and *stalled* while busy and none of `vllm:prompt_tokens_total`, `vllm:generation_tokens_total` and
`vllm:iteration_tokens_total_count` has moved. Stalled for `hang_after_s` = hung, reported once per
episode as a `CrashReport` of kind HUNG with the evidence: the gauges, the last progress, how long
/metrics has not answered (a whole server stopped, or an API server blocked itself), and the
state of every process of the server (a stopped or sleeping EngineCore). A server that never answered
/metrics (an attached server of another kind) cannot be judged, and the watchdog says so once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from workbench.serving.crash import CrashKind, CrashReport, ServerFailure, last_log_line
from workbench.serving.processes import name_and_state
from workbench.serving.prometheus import MetricsSnapshot, scrape

# No progress for this long with requests in flight = hung. Long beside any honest engine step (a full
# prefill batch of the embedded models takes seconds on 2 cores) and short beside HCCL's 1800 s.
HANG_AFTER_S = 60.0
POLL_S = 1.0
METRICS_TIMEOUT_S = 3.0  # one /metrics read; a stopped API server does not answer at all

_PROCESS_STATES = {
    "R": "running",
    "S": "sleeping (waiting on something)",
    "D": "in uninterruptible wait (device or disk)",
    "T": "stopped",
    "t": "stopped by a debugger",
    "Z": "exited, not yet reaped",
}

HANG_FIX = (
    "the engine is blocked, not slow. On an NPU, run `ascend-workbench triage` on every rank's log and "
    "~/ascend/log/debug/plog: the first rank that faulted makes the others wait in their collectives; set "
    "HCCL_EXEC_TIMEOUT (and HCCL_CONNECT_TIMEOUT) to a few minutes so the wait ends in an error with a code "
    "instead of half an hour of silence, and ASCEND_LAUNCH_BLOCKING=1 to name the kernel a stream "
    "synchronisation is waiting for; `npu-smi info` shows whether the cards still answer. Then stop the "
    "server (its state is not recoverable) and start it again (docs/METHOD.md §6, §9)"
)


def progress_of(snapshot: MetricsSnapshot) -> tuple[float | None, float | None, float | None]:
    """The counters that move whenever the engine does any work: prompt and generated tokens, engine steps."""
    return snapshot.prompt_tokens, snapshot.generation_tokens, snapshot.iteration_tokens_count


@dataclass
class StallClock:
    """How long the engine has been busy without progress, from a sequence of readings (pure logic).

    A reading is a `MetricsSnapshot`, or None when /metrics did not answer. `in_flight`: the client's
    requests in flight when the caller has a client (the load generator), None when it has none
    (`serve`): then the server's own running gauge says whether it is busy.
    """

    last_answer: MetricsSnapshot | None = None  # the last reading /metrics answered
    stalled_since: float | None = None  # when the engine was last seen progressing or idle

    def observe(self, at_s: float, snapshot: MetricsSnapshot | None, in_flight: int | None = None) -> float:
        """Seconds the engine has been stalled at `at_s` (0 when it progressed or is idle)."""
        previous = self.last_answer
        if snapshot is not None:
            self.last_answer = snapshot
        moved = snapshot is not None and (previous is None or progress_of(snapshot) != progress_of(previous))
        if moved or not self._busy(in_flight) or self.stalled_since is None:
            self.stalled_since = at_s
            return 0.0
        return at_s - self.stalled_since

    def _busy(self, in_flight: int | None) -> bool:
        if in_flight is not None:
            return in_flight > 0
        return self.last_answer is not None and (self.last_answer.running or 0) > 0

    @property
    def ever_answered(self) -> bool:
        return self.last_answer is not None


def describe_processes(pids: Sequence[int]) -> tuple[str, ...]:
    """One line per process: pid, command name, scheduler state (a stopped or device-waiting engine)."""
    lines = []
    for pid in pids:
        if (found := name_and_state(pid)) is not None:
            name, state = found
            lines.append(f"process {pid} {name}: {_PROCESS_STATES.get(state, state)} ({state})")
    return tuple(lines)


def hang_report(
    stalled_s: float,
    clock: StallClock,
    at_s: float,
    answered: bool,
    in_flight: int | None,
    processes: Sequence[str] = (),
    log_path: Path | None = None,
) -> CrashReport:
    """The HUNG report with its evidence, first line first (the one `CrashReport.message` shows)."""
    answer = clock.last_answer
    busy = f"{in_flight} requests in flight" if in_flight is not None else "requests running"
    evidence = [f"no token and no engine step for {stalled_s:.0f} s with {busy}"]
    if answer is not None:
        evidence.append(
            f"/metrics: running {_n(answer.running)}, waiting {_n(answer.waiting)}, prompt tokens "
            f"{_n(answer.prompt_tokens)}, generated tokens {_n(answer.generation_tokens)}, "
            f"engine steps {_n(answer.iteration_tokens_count)}"
        )
    if not answered and answer is not None:
        evidence.append(
            f"/metrics has not answered for {at_s - answer.at_s:.0f} s: the API server itself is blocked "
            "(an engine running inside it, or the whole process stopped)"
        )
    evidence += processes
    if log_path is not None:
        evidence.append(f"last log line: {last_log_line(log_path)!r}")
    return CrashReport(
        kind=CrashKind.HUNG,
        summary=f"the server stopped making progress: {evidence[0]}",
        fix=HANG_FIX,
        evidence=tuple(evidence),
        log_path=log_path,
    )


class ServerHung(ServerFailure):
    """The load ended early because the server hung; `report` has the evidence, `completed` what finished."""

    def __init__(self, report: CrashReport, completed: int = 0):
        super().__init__(report)
        self.completed = completed


class HangWatchdog:
    """Poll a server's /metrics while a `with` block runs; report a hang once per episode.

        with HangWatchdog(server.url, in_flight=lambda: run.in_flight, on_hang=print) as dog:
            ...
        dog.report  # the first hang's CrashReport, or None

    `pids` gives the server's processes for the evidence (none for an attached server); `on_hang` and
    `on_recover` run in the watchdog's thread; `hung` is set at the first hang.
    """

    def __init__(
        self,
        url: str,
        *,
        hang_after_s: float = HANG_AFTER_S,
        interval_s: float = POLL_S,
        in_flight: Callable[[], int] | None = None,
        pids: Callable[[], Sequence[int]] = tuple,
        log_path: Path | None = None,
        on_hang: Callable[[CrashReport], None] | None = None,
        on_recover: Callable[[float], None] | None = None,
        on_blind: Callable[[str], None] | None = None,
    ):
        self.url = url.rstrip("/")
        self.hang_after_s = hang_after_s
        self.interval_s = interval_s
        self.in_flight = in_flight
        self.pids = pids
        self.log_path = log_path
        self.on_hang, self.on_recover, self.on_blind = on_hang, on_recover, on_blind
        self.clock = StallClock()
        self.report: CrashReport | None = None
        self.hung = threading.Event()
        self._stop = threading.Event()
        self._started = time.monotonic()
        self._in_episode = self._blind_said = False
        self._thread = threading.Thread(target=self._loop, name="workbench-hang-watchdog", daemon=True)

    def __enter__(self) -> HangWatchdog:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        self._started = time.monotonic()
        with httpx.Client() as client:
            while not self._stop.is_set():
                snapshot = scrape(client, self.url, METRICS_TIMEOUT_S)
                now = snapshot.at_s if snapshot is not None else time.monotonic()
                self._judge(now, snapshot, self.in_flight() if self.in_flight is not None else None)
                self._stop.wait(self.interval_s)

    def _judge(self, now: float, snapshot: MetricsSnapshot | None, in_flight: int | None) -> None:
        """One reading: say once that the server cannot be judged, or start or end a hang episode."""
        stalled = self.clock.observe(now, snapshot, in_flight)
        if not self.clock.ever_answered:
            if not self._blind_said and now - self._started >= self.hang_after_s:
                self._blind_said = True
                if self.on_blind is not None:
                    self.on_blind(f"{self.url}/metrics never answered: hangs cannot be detected on this server")
        elif stalled >= self.hang_after_s and not self._in_episode:
            self._in_episode = True
            processes = describe_processes(self.pids())
            report = hang_report(stalled, self.clock, now, snapshot is not None, in_flight, processes, self.log_path)
            self.report = self.report or report
            self.hung.set()
            if self.on_hang is not None:
                self.on_hang(report)
        elif stalled == 0.0 and self._in_episode:
            self._in_episode = False
            if self.on_recover is not None:
                self.on_recover(now - self._started)


def _n(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f}"
