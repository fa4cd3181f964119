"""Error blocks: the lines of one failure, cut out of a log that interleaves many processes.

A block is a run of lines that one writer (a process tag, a pid, a rank) produced at an error level or
without a level (raw stderr), and that holds at least one trigger: an error code, a knowledge-base
signature, an exception or traceback line, CANN's `[FUNC:...][FILE:...]` context, an ERROR-level line.
Lines of the same writer at INFO/WARNING/DEBUG end the block; lines of other writers do not (eight
workers write at once). A new Python traceback starts a new block unless it is chained to the previous
one ("During handling of the above exception"). CANN log records (plog) carry a time on every line and
are grouped by time instead: records of one pid less than `PLOG_GAP_S` apart belong together, whatever
INFO records come between (other writers: `WRITER_GAP_S`). Raw output closes a block after `RAW_QUIET_LINES` lines that neither trigger
nor continue it (indented), so a progress bar after a traceback does not join it.

The builder streams: a 100 MB plog is read once, line by line, and its INFO/DEBUG records are skipped by
a string prefix test before any regular expression runs.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import PurePath

from workbench.triage.codes import ErrorCode, find_codes
from workbench.triage.frames import Frame, find_frames
from workbench.triage.line_format import PLOG_CONTEXT_STARTS, Level, LineHead, parse_line
from workbench.triage.operators import find_operators
from workbench.triage.places import Place, block_place, path_place
from workbench.triage.timestamps import LogTime
from workbench.triage.transport import unwrap

PLOG_GAP_S = 2.0  # records of one pid further apart than this are separate events
# Other writers: torch_npu stamps its error seconds after CANN's message (Ascend/pytorch#67: 8 s), so
# only a long silence separates two errors of one process that no INFO line came between.
WRITER_GAP_S = 60.0
RAW_QUIET_LINES = 4
MAX_BLOCK_LINES = 400  # a longer run is cut; each part is triaged on its own

# Generic triggers; the knowledge base adds its signatures (TriggerSet).
_GENERIC_TRIGGER = (
    r"Traceback \(most recent call last\)|TraceBack \(most recent call last\)|\[FUNC:|\[FILE:"
    r"|\[Error\]|[Ii]nner [Ee]rror|terminate called|File \"[^\"]+\", line \d+, in "
    r"|(?:^|[\s:)])[A-Za-z_][\w.]*(?:Error|Exception)(?::|$)"
)
_EXCEPTION = re.compile(r"(?:^|[\s)])(?P<exc>[A-Za-z_][\w.]*(?:Error|Exception|Fault|Interrupt)(?:: .*|$))")
_PY_TRACEBACK = "Traceback (most recent call last):"
_PLOG_THREAD = re.compile(r"\[[^\]]*\](?P<tid>\d+) ")
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")


@dataclass(frozen=True)
class ErrorBlock:
    """One failure as a log shows it, with what could be read out of it."""

    source: str  # the file (or '<log>') it came from
    first_line: int  # 1-based line numbers in that file
    last_line: int
    lines: tuple[str, ...]  # as written, prefixes kept
    time: LogTime | None  # the earliest time the block's lines give
    codes: tuple[ErrorCode, ...]  # unique, in order of appearance
    operators: tuple[str, ...]  # unique, most specific kind first
    frames: tuple[Frame, ...]  # the Python traceback's frames, outermost first
    place: Place
    exception: str | None  # the last exception line, e.g. 'RuntimeError: ACL stream synchronize failed, ...'
    forewarned: bool = False  # lines[0] is a WARNING that named the failure to come (see `extract_blocks`)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@dataclass
class _Open:
    """A block being collected (private to one extraction)."""

    lines: list[str] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)  # file line numbers (other writers' lines interleave)
    heads: list[LineHead] = field(default_factory=list)
    kept: int = 0  # lines up to here belong to the block; quiet raw lines after it are dropped
    first_trigger: int | None = None
    quiet: int = 0
    last_time: LogTime | None = None
    raised: bool = False  # an exception line has been added
    pid: int | None = None  # the first pid a line of the block named
    forewarned: bool = False  # opened by a WARNING that named the failure to come


@functools.lru_cache(maxsize=8)
def trigger_pattern(signature_patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One regular expression for 'this line can start or extend an error block' (cached: built once per
    knowledge base, used for every file)."""
    return re.compile("|".join([_GENERIC_TRIGGER, *(f"(?:{p})" for p in signature_patterns)]))


@functools.lru_cache(maxsize=8)
def warning_pattern(signature_patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """The signatures a WARNING line may carry (None when the knowledge base marks none)."""
    return re.compile("|".join(f"(?:{p})" for p in signature_patterns)) if signature_patterns else None


def _seconds_apart(a: LogTime, b: LogTime) -> float:
    return abs((a.moment - b.moment) / dt.timedelta(seconds=1))


def _breaks(current: _Open, head: LineHead) -> bool:
    """Whether `head` starts a new block instead of extending `current` (same writer)."""
    if head.time and current.last_time and head.time.has_year == current.last_time.has_year:
        if _seconds_apart(head.time, current.last_time) > (PLOG_GAP_S if head.plog else WRITER_GAP_S):
            return True
    if head.body.lstrip().startswith(_PY_TRACEBACK) and not head.plog and current.raised:
        # A traceback after one that ended in an exception is another error, unless chained to it; a
        # traceback after a lead-in line ("WorkerProc hit an exception.") belongs with that line.
        previous = next((line for line in reversed(current.lines) if line.strip()), "")
        return not any(chained in previous for chained in _CHAINED)
    return len(current.lines) >= MAX_BLOCK_LINES


def _plog_thread(head: LineHead) -> str | None:
    """The thread id of a CANN record ('[stars_engine.cc:1502]133843 ProcLogicCqReport:...' -> '133843')."""
    match = _PLOG_THREAD.match(head.body) if head.plog else None
    return match["tid"] if match else None


def _block_time(heads: list[LineHead]) -> LogTime | None:
    """When the failure happened: the earliest time of the block's lines. In a CANN log it is counted from
    the first record with a code, and the records of the same thread just before it ('Task run failed'
    before 'EZ9999'): the code-less ERROR records another thread logs every few milliseconds can keep a
    block open for seconds before the failure."""
    start = next((i for i, h in enumerate(heads) if find_codes(h.body)), 0)
    thread = _plog_thread(heads[start]) if heads else None
    if thread is None:
        start = 0
    while start > 0 and _plog_thread(heads[start - 1]) == thread:
        start -= 1
    times = [h.time for h in heads[start:] if h.time is not None]
    return min(times, key=lambda t: (not t.has_year, t.moment)) if times else None


def _finish(current: _Open, source: str, from_path: Place) -> ErrorBlock | None:
    if current.first_trigger is None:
        return None
    lines = current.lines[current.first_trigger : current.kept]
    heads = current.heads[current.first_trigger : current.kept]
    codes: list[ErrorCode] = []
    operators: list[str] = []
    frames: list[Frame] = []
    exception = None
    for head in heads:
        codes += [c for c in find_codes(head.body) if c not in codes]
        operators += [o for o in find_operators(head.body) if o not in operators]
        frames += find_frames(head.body)
        match = _EXCEPTION.search(head.body)
        if match and not head.body.startswith((" ", "\t")):
            exception = match["exc"].strip()
    text = "\n".join(lines)
    return ErrorBlock(
        source=source,
        first_line=current.numbers[current.first_trigger],
        last_line=current.numbers[current.kept - 1],
        lines=tuple(lines),
        time=_block_time(heads),
        codes=tuple(codes),
        operators=tuple(operators),
        frames=tuple(frames),
        place=block_place(heads, text, from_path),
        exception=exception,
        forewarned=current.forewarned,
    )


def extract_blocks(
    lines: Iterable[str],
    trigger: re.Pattern[str],
    source: str = "<log>",
    path: PurePath | None = None,
    warning: re.Pattern[str] | None = None,
) -> Iterator[ErrorBlock]:
    """The error blocks of one log, in the order they end (sort them by time to compare logs).

    `warning`: what a WARNING line says when it names the failure before it happens (vLLM's "... is not
    supported by the V1 Engine. Falling back to V0." ahead of the traceback the fallback causes). Such a
    line is kept and opens the next block of the same writer, so the block carries its cause."""
    from_path = path_place(path)
    open_blocks: dict[str, _Open] = {}
    warned: dict[str, tuple[int, str, LineHead]] = {}
    last_writer: str | None = None  # raw output continues the block of the line before it

    def close(stream: str) -> Iterator[ErrorBlock]:
        current = open_blocks.pop(stream, None)
        block = _finish(current, source, from_path) if current else None
        if block is not None:
            yield block

    for number, raw in enumerate(unwrap(lines), 1):
        line = raw.rstrip("\r\n")
        if line.startswith(PLOG_CONTEXT_STARTS):
            continue  # a CANN INFO/DEBUG record: plog blocks are grouped by time, not interrupted
        head = parse_line(line)
        codes = find_codes(head.body)
        if head.level is Level.CONTEXT and not codes:
            if warning is not None and warning.search(head.body):
                warned[head.stream] = (number, line, head)
            yield from close(head.stream)
            continue
        stream = _writer(head, last_writer, open_blocks)
        current = open_blocks.get(stream)
        if current is not None and _breaks(current, head):
            yield from close(stream)
            current = None
        # A warning that carries a CANN code is torch_npu reporting a device error without raising
        # ("[W530 ...] Warning: NPU warning, error code is 507035"): it counts as an error line.
        is_trigger = head.level is not None or bool(codes) or bool(trigger.search(head.body))
        if current is None:
            if not is_trigger:
                continue
            current = open_blocks[stream] = _Open()
            early = warned.pop(stream, None)
            if early is not None:
                _add(current, *early, is_trigger=True)
                current.forewarned = True
        _add(current, number, line, head, is_trigger)
        last_writer = stream
        if current.quiet >= RAW_QUIET_LINES:
            yield from close(stream)
    for stream in list(open_blocks):
        yield from close(stream)


def _writer(head: LineHead, last_writer: str | None, open_blocks: dict[str, _Open]) -> str:
    """Whose block a line belongs to. Raw output (no process or logger prefix) continues the block of the
    line before it: stderr continuation lines ("[Error]: ...", "EH9999: Inner Error!") carry no prefix,
    and torch_npu's stamp after a c10 warning names the same process. It starts its own block when it
    names another pid (two processes writing to one stderr) or starts a Python traceback."""
    previous = open_blocks.get(last_writer) if last_writer is not None else None
    if not head.raw or previous is None or head.body.lstrip().startswith(_PY_TRACEBACK):
        return head.stream
    if head.pid is not None and previous.pid not in (None, head.pid):
        return head.stream
    return last_writer


def _add(current: _Open, number: int, line: str, head: LineHead, is_trigger: bool) -> None:
    current.numbers.append(number)
    current.lines.append(line)
    current.heads.append(head)
    continues = is_trigger or head.level is Level.ERROR or head.body[:1] in (" ", "\t") or head.time is not None
    if is_trigger and current.first_trigger is None:
        current.first_trigger = len(current.lines) - 1
    if continues:
        current.kept, current.quiet = len(current.lines), 0
    elif line.strip():
        current.quiet += 1
    if head.time is not None:
        current.last_time = head.time
    if current.pid is None:
        current.pid = head.pid
    if not current.raised and head.body[:1] not in (" ", "\t") and _EXCEPTION.search(head.body):
        current.raised = True
