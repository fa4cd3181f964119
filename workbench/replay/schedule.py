"""When each request of a replay is sent: the recorded timing, scaled, with conversations kept in order.

A request that stands alone is sent at its recorded offset divided by `speed` (2 = twice as fast), counted
from the first request still to send. A follow-up turn of a conversation (`TraceRecord.after_parent`) is
sent only after its parent's answer has come back, and then after the recorded think time, also divided by
`speed` — the user read the answer before typing, whatever the new service's latency (GuideLLM's replay
retargets child turns from their parent the same way). A parent that an earlier, killed run already
replayed does not hold its children back.

Worked example, speed 2: A at 0 s, B at 4 s, C at 6 s a follow-up of A with think time 1 s. B is sent at
2 s; if A's answer comes back at 3.2 s, C is sent at 3.2 + 0.5 = 3.7 s (not at 3 s, and not before A's answer).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from workbench.errors import WorkbenchError
from workbench.serving.load.trace import TraceRecord


@dataclass(frozen=True)
class Planned:
    """One request to send: at `offset_s` from the replay's start, or `think_s` after `wait_for` answered."""

    record: TraceRecord
    offset_s: float
    wait_for: str | None = None
    think_s: float = 0.0


def plan(records: Sequence[TraceRecord], speed: float, done: Collection[str] = ()) -> list[Planned]:
    """The requests not yet `done`, in arrival order, with their send rule (see the module docstring)."""
    if not speed > 0:
        raise WorkbenchError(f"--speed {speed}: give a positive factor (1 = as recorded, 2 = twice as fast)")
    pending = [r for r in records if r.id not in done]
    if not pending:
        return []
    start = pending[0].arrival_s
    present = {r.id for r in pending}
    planned = []
    for record in pending:
        waits = record.after_parent and record.parent in present
        planned.append(
            Planned(
                record,
                offset_s=max(record.arrival_s - start, 0.0) / speed,
                wait_for=record.parent if waits else None,
                think_s=(record.think_s or 0.0) / speed if waits else 0.0,
            )
        )
    return planned


__all__ = ["Planned", "plan"]
