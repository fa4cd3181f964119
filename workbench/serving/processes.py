"""Process groups of the servers the workbench starts: who is in one, and how to stop all of it.

A vLLM server is an API server, an EngineCore and workers; it runs in its own session, so stopping it is
SIGTERM to the whole group, a grace period, then SIGKILL to whatever is left, including descendants that
moved to a group of their own. Read from /proc, so no process needs to be our child to be found.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

TERM_GRACE_S = 20.0  # SIGTERM -> SIGKILL; vLLM shuts EngineCore down in a few seconds


def _stat(pid: int) -> tuple[str, list[str]] | None:
    """(command name, the fields after it) from /proc/PID/stat, or None when the process is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name may contain spaces and ')': it runs from the first '(' to the last ')'
    return raw[raw.index("(") + 1 : raw.rindex(")")], raw[raw.rindex(")") + 2 :].split()


def _stat_fields(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgrp) from /proc/PID/stat, or None when the process is gone."""
    stat = _stat(pid)
    if stat is None:
        return None
    fields = stat[1]
    return fields[0], int(fields[1]), int(fields[2])


def name_and_state(pid: int) -> tuple[str, str] | None:
    """(command name, scheduler state letter: R, S, D, T, Z, ...), or None when the process is gone."""
    stat = _stat(pid)
    return (stat[0], stat[1][0]) if stat is not None else None


def live_processes(pgid: int, root_pid: int | None = None) -> list[int]:
    """Live (non-zombie) processes in process group `pgid`, plus descendants of `root_pid` that left it."""
    table: dict[int, tuple[str, int, int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat_fields(int(entry.name))) is not None:
            table[int(entry.name)] = fields
    members = {pid for pid, (state, _, pgrp) in table.items() if pgrp == pgid and state != "Z"}
    if root_pid is not None:
        frontier = {root_pid}
        while frontier:
            children = {pid for pid, (state, ppid, _) in table.items() if ppid in frontier and state != "Z"}
            frontier = children - members
            members |= children
    return sorted(members)


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def _signal_all(pids: list[int], pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def stop_group(pgid: int, grace_s: float = TERM_GRACE_S, reap: Callable[[], object] = lambda: None) -> None:
    """SIGTERM a server's whole group, wait up to `grace_s`, SIGKILL what is left.

    `pgid` is the API server's pid (start_new_session makes the leader's pid the group id); descendants
    that left the group are found through the leader's process tree and signalled too. `reap` is called
    while waiting: a parent passes `process.poll` so the leader does not linger as its zombie; a process
    that is not the parent (the engine pool's owner) cannot reap, and a zombie counts as gone.
    """
    known = live_processes(pgid, pgid)
    if known:
        _signal_all(known, pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            reap()
            if not live_processes(pgid):
                break
            time.sleep(0.2)
    for _ in range(50):
        left = sorted(set(live_processes(pgid)) | {pid for pid in known if alive(pid)})
        if not left:
            break
        _signal_all(left, pgid, signal.SIGKILL)
        time.sleep(0.1)
        reap()


def stop_process_group(process: subprocess.Popen, grace_s: float = TERM_GRACE_S) -> None:
    """Stop the group this process leads (see `stop_group`) and reap the leader."""
    stop_group(process.pid, grace_s, reap=process.poll)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)
