"""A triage of one or many logs: every error event, ordered in time across files, and the first error.

Later errors are usually consequences of the first (a rank that faults makes the others' collectives
time out; the engine process dies because its worker did), and CANN's own guidance is to start from the
first operator that reported (the CANN error-code reference, "asynchronous task execution"). So events
are ordered by time: the year comes from the lines that wrote one, a line that wrote no time takes the
time of the error before it in the same file. The first error is the earliest event that is not marked
a consequence (the HCCL watchdog ending a process, an EngineDeadError) and that an error code or a
knowledge-base entry describes; without such an event, the earliest event.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from workbench.triage.blocks import ErrorBlock, extract_blocks, trigger_pattern, warning_pattern
from workbench.triage.collect_env import CollectedEnv, looks_like_collect_env, parse_collect_env
from workbench.triage.diagnosis import Diagnosis, diagnose
from workbench.triage.inputs import InputFile, InputKind, InputProblem, expand, read_lines, sniff
from workbench.triage.knowledge import KnowledgeBase, load_knowledge_base
from workbench.triage.timestamps import NO_YEAR

COLLECT_ENV_MAX_BYTES = 4 * 2**20  # a collect_env paste is a few kB; larger files are streamed as logs


@dataclass(frozen=True)
class ErrorEvent:
    block: ErrorBlock
    diagnosis: Diagnosis
    when: dt.datetime | None  # the block's time in the report's year (or inherited), for ordering

    @property
    def significant(self) -> bool:
        """Worth naming as the cause: not a consequence, and a code or an entry says what it is."""
        return not self.diagnosis.consequence and (self.diagnosis.known or self.diagnosis.code is not None)


@dataclass(frozen=True)
class StackReport:
    source: str
    stack: CollectedEnv


@dataclass(frozen=True)
class TriageReport:
    inputs: tuple[InputFile, ...]
    problems: tuple[InputProblem, ...]
    events: tuple[ErrorEvent, ...]  # ordered by time
    first: ErrorEvent | None
    stacks: tuple[StackReport, ...]  # collect_env pastes found among the inputs
    knowledge_base: Path | None

    @property
    def later(self) -> tuple[ErrorEvent, ...]:
        return tuple(e for e in self.events if e is not self.first)


def _first(events: list[ErrorEvent]) -> ErrorEvent | None:
    for wanted in (lambda e: e.significant, lambda e: not e.diagnosis.consequence, lambda e: True):
        match = next((e for e in events if wanted(e)), None)
        if match is not None:
            return match
    return None


def _reference_year(blocks: Iterable[ErrorBlock]) -> int:
    years = Counter(b.time.moment.year for b in blocks if b.time and b.time.has_year)
    return max(years) if years else NO_YEAR


def _timed(per_file: list[list[ErrorBlock]], year: int) -> list[tuple[ErrorBlock, dt.datetime | None, int]]:
    """Each block with its resolved time: its own, else the previous block's in the file, else the next's."""
    timed = []
    for index, blocks in enumerate(per_file):
        resolved = [b.time.resolve(year) if b.time else None for b in blocks]
        for i in range(1, len(resolved)):
            resolved[i] = resolved[i] or resolved[i - 1]
        for i in range(len(resolved) - 2, -1, -1):
            resolved[i] = resolved[i] or resolved[i + 1]
        timed += [(b, t, index) for b, t in zip(blocks, resolved)]
    return timed


def assemble(per_file: list[list[ErrorBlock]], kb: KnowledgeBase) -> tuple[tuple[ErrorEvent, ...], ErrorEvent | None]:
    """Events of every file, ordered in time (untimed last, then by file and line), and the first error."""
    timed = _timed(per_file, _reference_year(b for blocks in per_file for b in blocks))
    timed.sort(key=lambda item: (item[1] is None, item[1] or dt.datetime.min, item[2], item[0].first_line))
    events = [ErrorEvent(block, diagnose(block, kb), when) for block, when, _ in timed]
    return tuple(events), _first(events)


def _read_blocks(source: InputFile, kb: KnowledgeBase) -> tuple[list[ErrorBlock], CollectedEnv | None]:
    trigger, warning = _patterns(kb)
    if source.kind is InputKind.LOG and source.path.stat().st_size <= COLLECT_ENV_MAX_BYTES:
        text = source.path.read_text(encoding="utf-8", errors="replace")
        stack = parse_collect_env(text) if looks_like_collect_env(text) else None
        lines: Iterable[str] = text.splitlines()
    else:
        stack, lines = None, read_lines(source.path)
    blocks = list(extract_blocks(lines, trigger, source=str(source.path), path=source.path, warning=warning))
    return blocks, stack


def _patterns(kb: KnowledgeBase) -> tuple[re.Pattern[str], re.Pattern[str] | None]:
    """(what starts or extends a block, what a WARNING line may say about the failure to come)."""
    trigger = trigger_pattern(tuple(s.pattern for s in kb.signatures))
    return trigger, warning_pattern(tuple(s.pattern for s in kb.signatures if s.in_warnings))


def triage_paths(paths: Iterable[Path | str], kb: KnowledgeBase | None = None) -> TriageReport:
    """Triage logs, plog folders and collect_env pastes together; unreadable inputs become problems."""
    kb = kb or load_knowledge_base()
    files, problems = expand([Path(p) for p in paths])
    per_file: list[list[ErrorBlock]] = []
    stacks: list[StackReport] = []
    read: list[InputFile] = []
    for source in files:
        reason = sniff(source.path)
        if reason is None:
            try:
                blocks, stack = _read_blocks(source, kb)
            except OSError as exc:
                reason = f"could not be read to the end ({exc.strerror or exc}); skipped"
        if reason is not None:
            problems.append(InputProblem(source.path, reason))
            continue
        read.append(source)
        per_file.append(blocks)
        if stack is not None:
            stacks.append(StackReport(str(source.path), stack))
    events, first = assemble(per_file, kb)
    return TriageReport(tuple(read), tuple(problems), events, first, tuple(stacks), kb.source)


def triage_text(text: str, source: str = "<log>", kb: KnowledgeBase | None = None) -> TriageReport:
    """Triage one log held in memory (what the crash classifier has: a server's log text)."""
    kb = kb or load_knowledge_base()
    trigger, warning = _patterns(kb)
    blocks = list(extract_blocks(text.splitlines(), trigger, source=source, warning=warning))
    events, first = assemble([blocks], kb)
    stacks = (StackReport(source, parse_collect_env(text)),) if looks_like_collect_env(text) else ()
    return TriageReport((), (), events, first, stacks, kb.source)
