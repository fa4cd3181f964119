"""How much of the machine other work took while a window ran: the noise a shared host adds, measured.

A window's latencies mean something only if the engine had the cores it was given. Linux counts every core's
busy time in `/proc/stat` (the `cpu` line: user, nice, system, idle, iowait, irq, softirq, steal — in clock
ticks, proc(5)) and every process's own in `/proc/<pid>/stat` (utime, stime: fields 14 and 15). Over a
window, the busy ticks that are neither the server's process tree nor this process (the load generator) are
other work's:

    others = (Δ machine busy - Δ server tree - Δ this process) / Δ machine total      (a share of all cores)

A window during which others took more than `max_others_cpu` of the machine is measured again (up to
`window_attempts` times, the least contended attempt kept), and every window's share is in the report, so a
difference is never read off a window the machine took away. Linux only: elsewhere the share is unknown
(None) and no window is repeated for it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from workbench.serving.processes import live_processes

BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user, nice, system, irq, softirq, steal (after the 'cpu' label)


@dataclass(frozen=True)
class CpuSample:
    busy: int  # machine busy ticks, every core
    total: int  # machine ticks, every core
    ours: int  # the server's process tree and this process


def _machine() -> tuple[int, int] | None:
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    values = [int(v) for v in first[1:9]]
    busy = sum(values[i] for i in BUSY_FIELDS)
    return busy, busy + values[3] + values[4]


def _process_ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))


def sample(server_pid: int | None) -> CpuSample | None:
    """Now: the machine's ticks and ours (None off Linux)."""
    machine = _machine()
    if machine is None:
        return None
    tree = live_processes(server_pid, server_pid) if server_pid is not None else []
    ours = sum(_process_ticks(pid) for pid in {*tree, os.getpid()})
    return CpuSample(machine[0], machine[1], ours)


def others_share(before: CpuSample | None, after: CpuSample | None) -> float | None:
    """The share of all cores other work used between two samples (0..1), None when unknown."""
    if before is None or after is None or after.total <= before.total:
        return None
    others = (after.busy - before.busy) - (after.ours - before.ours)
    return min(max(others / (after.total - before.total), 0.0), 1.0)


__all__ = ["CpuSample", "others_share", "sample"]
