"""One log line's head: which process wrote it, at what level and time, and the text after the prefixes.

The formats a vLLM-on-Ascend failure mixes in one place (examples are lines from public issue posts,
tests/fixtures/triage/SOURCES.md):

    CANN plog / ASCEND_SLOG_PRINT_TO_STDOUT (the CANN log reference, "Log Format"):
      [ERROR] RUNTIME(129510,all__):2026-01-20-09:48:14.622.900 [stars_engine.cc:1502]133843 ProcLogic...
    vLLM's process prefix and logger (nested prefixes: the innermost names the writer):
      (EngineCore_DP0 pid=702) ERROR 09-04 09:50:12 [core.py:702] RuntimeError: Worker failed ...
      ERROR 03-05 07:15:39 engine.py:387] NPU out of memory ...            (older vLLM, no '[')
    torch's c10 log, with the rank torchrun adds:
      [rank1]:[E324 13:00:25.428029551 compiler_depend.ts:574] [Rank 1] Watchdog caught ...
    torch_npu's error stamp and CANN's message codes carry a time in their text:
      [ERROR] 2025-06-03-14:54:23 (PID:8648, Device:0, RankID:-1) ERR00100 PTA call acl api failed.
      EZ9999: [PID: 301341] 2025-07-08-19:23:04.799.485 op[QuantBatchMatmulV3], ...
    torch_npu's distributed logger:
      [285] [2025-12-12 12:10:10:644] torch.distributed: [ERROR] [479] Find exception ...

A line with none of these is raw output (a Python traceback printed to stderr, a progress bar): it has
no level, so it can belong to an error block; the block builder decides.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from workbench.triage.timestamps import LogTime, make_time


class Level(str, enum.Enum):
    ERROR = "error"  # ERROR, CRITICAL, FATAL, and c10's E / F
    CONTEXT = "context"  # INFO, WARNING, DEBUG, EVENT, TRACE: never the cause of a failure


@dataclass(frozen=True)
class LineHead:
    """What the prefixes of one line say; every field is None where the line does not say it."""

    stream: str  # who wrote it: a process tag ('EngineCore_DP0 pid=702'), 'pid 129510', or '' (raw)
    level: Level | None
    time: LogTime | None
    pid: int | None
    rank: int | None
    worker: str | None  # vLLM's process tag without the pid, e.g. 'Worker_DP0_TP7_EP7'
    body: str  # the text after the prefixes
    plog: bool  # a CANN log record: its own timestamp on every line, grouped by time not by neighbours
    raw: bool = False  # no process or logger prefix: stderr output, which continues the line before it


_LEVELS = {
    "ERROR": Level.ERROR,
    "CRITICAL": Level.ERROR,
    "FATAL": Level.ERROR,
    "WARNING": Level.CONTEXT,
    "WARN": Level.CONTEXT,
    "INFO": Level.CONTEXT,
    "DEBUG": Level.CONTEXT,
    "EVENT": Level.CONTEXT,
    "TRACE": Level.CONTEXT,
}
_C10_LEVELS = {"E": Level.ERROR, "F": Level.ERROR, "W": Level.CONTEXT, "I": Level.CONTEXT}
# Cheap test for the lines a 100 MB plog is made of: context records are skipped without a regex.
PLOG_CONTEXT_STARTS = ("[INFO] ", "[DEBUG] ", "[EVENT] ", "[TRACE] ", "[WARNING] ")

_PLOG = re.compile(
    r"\[(?P<level>[A-Z]+)\] (?P<module>[A-Z_0-9]+)\((?P<pid>\d+),(?P<pname>[^)]*)\):"
    r"(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)-(?P<hms>\d\d:\d\d:\d\d)\.(?P<frac>\d{3}\.\d{3}) "
)
_PROCESS = re.compile(r"\((?P<tag>[^()]*?)\bpid=(?P<pid>\d+)[^()]*\)\s*")
_VLLM = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<mo>\d\d)-(?P<d>\d\d) (?P<hms>\d\d:\d\d:\d\d)"
    r"(?:\.(?P<frac>\d+))? \[?[\w./-]+:\d+\] ?"
)
_TORCHRUN_RANK = re.compile(r"\[rank(?P<rank>\d+)\]:\s?")
_C10 = re.compile(r"\[(?P<level>[EWIF])(?P<md>\d{3,4}) (?P<hms>\d\d:\d\d:\d\d)\.(?P<frac>\d+) [^\]]*\] ?")
_TORCH_NPU_DIST = re.compile(
    r"\[(?P<pid>\d+)\] \[(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d) (?P<hms>\d\d:\d\d:\d\d):(?P<frac>\d{3})\] "
    r"[\w.]+: \[(?P<level>[A-Z]+)\] "
)
_UVICORN = re.compile(r"(?P<level>INFO|WARNING|ERROR|DEBUG|CRITICAL):\s+")
# Times written inside the text: torch_npu's stamp and CANN's message codes.
_TEXT_TIME = re.compile(
    r"(?P<y>20\d\d)-(?P<mo>\d\d)-(?P<d>\d\d)[- ](?P<hms>\d\d:\d\d:\d\d)(?:[.:,](?P<frac>\d{3}(?:\.\d{3})?))?"
)
_STAMP_PID = re.compile(
    r"\(PID:(?P<pid>\d+), Device:(?P<device>-?\d+), RankID:(?P<rank>-?\d+)\)|\[PID: ?(?P<mpid>\d+)\]"
)


def _worker(tag: str) -> str | None:
    return tag.strip().rstrip(",") or None


def _rank_in_tag(tag: str) -> int | None:
    """'VllmWorker rank=1' -> 1; 'VllmWorker TP0' or 'Worker_DP0_TP7_EP7' -> 7 (the tensor-parallel rank)."""
    match = re.search(r"rank=(\d+)", tag) or re.search(r"TP(\d+)", tag)
    return int(match.group(1)) if match else None


def _plog_head(line: str, match: re.Match[str]) -> LineHead:
    time = make_time(int(match["y"]), int(match["mo"]), int(match["d"]), match["hms"], match["frac"])
    pid = int(match["pid"])
    return LineHead(
        stream=f"pid {pid}",
        level=_LEVELS.get(match["level"], Level.CONTEXT),
        time=time,
        pid=pid,
        rank=None,
        worker=None,
        body=line[match.end() :],
        plog=True,
    )


def _text_time(body: str) -> LogTime | None:
    match = _TEXT_TIME.search(body)
    if not match:
        return None
    return make_time(int(match["y"]), int(match["mo"]), int(match["d"]), match["hms"], match["frac"] or "")


@dataclass(frozen=True)
class _Prefix:
    """What vLLM's process prefixes and torchrun's rank prefix say, and where the rest begins."""

    end: int = 0
    stream: str = ""
    pid: int | None = None
    rank: int | None = None
    worker: str | None = None


def _process_prefix(line: str) -> _Prefix:
    """'(EngineCore_1 pid=113803) (VllmWorker rank=0 pid=114020) ...': the innermost prefix names the writer."""
    prefix = _Prefix()
    while match := _PROCESS.match(line, prefix.end):
        tag = match["tag"]
        prefix = _Prefix(
            match.end(), f"{tag.strip()} pid={match['pid']}", int(match["pid"]), _rank_in_tag(tag), _worker(tag)
        )
    torchrun = _TORCHRUN_RANK.match(line, prefix.end)
    if torchrun:
        rank = int(torchrun["rank"])
        prefix = _Prefix(torchrun.end(), prefix.stream or f"rank {rank}", prefix.pid, rank, prefix.worker)
    return prefix


def _logger(line: str, pos: int) -> tuple[int, Level | None, LogTime | None, int | None]:
    """The logger prefix at `pos` (vLLM, c10, torch_npu distributed, uvicorn): end, level, time, pid."""
    if vllm := _VLLM.match(line, pos):
        time = make_time(None, int(vllm["mo"]), int(vllm["d"]), vllm["hms"], vllm["frac"] or "")
        return vllm.end(), _LEVELS[vllm["level"]], time, None
    if c10 := _C10.match(line, pos):
        md = c10["md"]
        return (
            c10.end(),
            _C10_LEVELS[c10["level"]],
            make_time(None, int(md[:-2]), int(md[-2:]), c10["hms"], c10["frac"]),
            None,
        )
    if dist := _TORCH_NPU_DIST.match(line, pos):
        time = make_time(int(dist["y"]), int(dist["mo"]), int(dist["d"]), dist["hms"], dist["frac"])
        return dist.end(), _LEVELS.get(dist["level"], Level.CONTEXT), time, int(dist["pid"])
    if uvicorn := _UVICORN.match(line, pos):
        return uvicorn.end(), _LEVELS[uvicorn["level"]], None, None
    return pos, None, None, None


def parse_line(line: str) -> LineHead:
    """The head of one line (without its newline)."""
    plog = _PLOG.match(line)
    if plog:
        return _plog_head(line, plog)
    prefix = _process_prefix(line)
    end, level, time, logger_pid = _logger(line, prefix.end)
    pid, rank = prefix.pid if prefix.pid is not None else logger_pid, prefix.rank
    stream = prefix.stream or (f"pid {logger_pid}" if logger_pid is not None else "")
    body = line[end:]
    raw = not prefix.stream and end == prefix.end
    stamp = _STAMP_PID.search(body)
    if stamp:  # torch_npu's '(PID:.., Device:.., RankID:..)' or CANN's '[PID: ..]', with a time beside it
        pid = pid if pid is not None else int(stamp["pid"] or stamp["mpid"])
        stream = stream or (f"pid {pid}" if raw else "")
        if rank is None and stamp["rank"] is not None and int(stamp["rank"]) >= 0:
            rank = int(stamp["rank"])
        time = _text_time(body) or time
        if body.startswith("[ERROR] "):
            level = Level.ERROR
    return LineHead(stream, level, time, pid, rank, prefix.worker, body, plog=False, raw=raw)
