"""Stream a Chrome trace (torch.profiler, torch_npu's trace_view.json, msprof_*.json) into compact columns.

A vLLM worker's trace of a few seconds holds hundreds of thousands of events (90 MB gzipped per rank
with Python stacks). Loading it with `json.load` builds a Python dict per event — several times the
file in memory. Here the events are streamed with ijson (its C backend, yajl2_c) and each complete
('X') event keeps only what the analysis uses, in typed arrays: name and category as interned ids,
process and thread ids, start and duration in microseconds (~40 bytes an event). Metadata events
('M': process_name, process_labels, thread_name) become small dicts.

Both layouts are read: the object form `{"traceEvents": [...], ...}` torch.profiler writes, and the
bare array torch_npu writes for trace_view.json. Gzipped files (`.gz`, vLLM's default) are streamed
through gzip. A file cut short (a capture still being written, a full disk) is one WorkbenchError.
"""

from __future__ import annotations

import gzip
import re
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import ijson
import numpy as np

from workbench.errors import WorkbenchError

HEAD_BYTES = 1 << 16  # metadata (distributedInfo) precedes traceEvents in torch.profiler's output


@dataclass(frozen=True)
class TraceTable:
    """The complete events of one trace as columns; ids index into `names` / `categories`."""

    path: Path
    names: tuple[str, ...]
    categories: tuple[str, ...]
    name_id: np.ndarray  # [n] int32
    cat_id: np.ndarray  # [n] int32
    pid: np.ndarray  # [n] int64 (interned: see `pids`)
    tid: np.ndarray  # [n] int64 (interned: see `tids`)
    ts: np.ndarray  # [n] float64 µs since the trace's first event
    dur: np.ndarray  # [n] float64 µs
    pids: tuple[Any, ...]  # interned id -> the trace's own pid value
    tids: tuple[Any, ...]
    process_names: dict[Any, str]  # trace pid -> 'process_name' metadata
    process_labels: dict[Any, str]  # trace pid -> 'process_labels' (torch_npu: 'CPU', 'NPU', 'NPU 0')
    thread_names: dict[tuple[Any, Any], str]
    base_ts: float  # the absolute timestamp (µs) that `ts` counts from
    rank: int | None  # distributedInfo.rank when the trace has one

    def __len__(self) -> int:
        return len(self.ts)

    def ids_matching(self, pattern: re.Pattern[str]) -> np.ndarray:
        """Name ids whose name matches `pattern` (search)."""
        return np.array([i for i, n in enumerate(self.names) if pattern.search(n)], dtype=np.int32)

    def mask_names(self, pattern: re.Pattern[str]) -> np.ndarray:
        """[n] bool: events whose name matches `pattern`."""
        return np.isin(self.name_id, self.ids_matching(pattern))

    def pid_of(self, trace_pid: Any) -> int | None:
        """The interned id of a trace pid (None when the trace has no event of it)."""
        return next((i for i, p in enumerate(self.pids) if p == trace_pid), None)


def open_text(path: Path) -> IO[bytes]:
    """The file's bytes, gunzipped when it is gzip (by magic number, not by name)."""
    with path.open("rb") as handle:
        magic = handle.read(2)
    return gzip.open(path, "rb") if magic == b"\x1f\x8b" else path.open("rb")


def _head(path: Path) -> bytes:
    try:
        with open_text(path) as handle:
            return handle.read(HEAD_BYTES)
    except (OSError, EOFError) as exc:
        raise WorkbenchError(f"{path}: cannot read the trace ({exc}); the capture may still be writing it") from None


def _rank_in_head(head: bytes) -> int | None:
    match = re.search(rb'"distributedInfo"\s*:\s*\{[^}]*"rank"\s*:\s*(\d+)', head)
    return int(match.group(1)) if match else None


class _Builder:
    """Accumulates events into typed arrays (private to `read_trace`).

    `consume` is the hot loop (a million events in a few seconds): lookups are bound to locals and
    each complete event costs a handful of dict reads and array appends.
    """

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self.cats: dict[str, int] = {}
        self.pids: dict[Any, int] = {}
        self.tids: dict[Any, int] = {}
        self.name_id, self.cat_id = array("i"), array("i")
        self.pid, self.tid = array("q"), array("q")
        self.ts, self.dur = array("d"), array("d")
        self.process_names: dict[Any, str] = {}
        self.process_labels: dict[Any, str] = {}
        self.thread_names: dict[tuple[Any, Any], str] = {}

    def consume(self, events: Iterator[Any]) -> None:
        names, cats, pids, tids = self.names, self.cats, self.pids, self.tids
        add_name, add_cat, add_pid, add_tid = (
            self.name_id.append,
            self.cat_id.append,
            self.pid.append,
            self.tid.append,
        )
        add_ts, add_dur = self.ts.append, self.dur.append
        for event in events:
            if not isinstance(event, dict):
                continue
            phase = event.get("ph")
            if phase == "M":
                self._metadata(event)
                continue
            if phase != "X":
                continue
            try:
                ts, dur = float(event["ts"]), float(event.get("dur") or 0.0)
            except (KeyError, TypeError, ValueError):
                continue  # an event without a usable time carries nothing for the analysis
            name, cat, pid, tid = event.get("name", ""), event.get("cat", ""), event.get("pid"), event.get("tid")
            add_name(names[name] if name in names else names.setdefault(name, len(names)))
            add_cat(cats[cat] if cat in cats else cats.setdefault(cat, len(cats)))
            add_pid(pids[pid] if pid in pids else pids.setdefault(pid, len(pids)))
            add_tid(tids[tid] if tid in tids else tids.setdefault(tid, len(tids)))
            add_ts(ts)
            add_dur(dur)

    def _metadata(self, event: dict[str, Any]) -> None:
        args = event.get("args") or {}
        name, pid = event.get("name"), event.get("pid")
        if name == "process_name":
            self.process_names[pid] = str(args.get("name", ""))
        elif name == "process_labels":
            self.process_labels[pid] = str(args.get("labels", ""))
        elif name == "thread_name":
            self.thread_names[(pid, event.get("tid"))] = str(args.get("name", ""))

    def table(self, path: Path, rank: int | None) -> TraceTable:
        def column(values: array, dtype: Any) -> np.ndarray:
            # a view on the array's own buffer (it stays alive through the view): no second copy of a
            # million-event trace at its peak
            return np.frombuffer(values, dtype=dtype) if len(values) else np.empty(0, dtype)

        ts = column(self.ts, np.float64)
        base = float(ts.min()) if len(ts) else 0.0
        ts -= base  # in place: µs since the first event
        return TraceTable(
            path=path,
            names=tuple(str(n) for n in self.names),
            categories=tuple(str(c) for c in self.cats),
            name_id=column(self.name_id, np.int32),
            cat_id=column(self.cat_id, np.int32),
            pid=column(self.pid, np.int64),
            tid=column(self.tid, np.int64),
            ts=ts,
            dur=column(self.dur, np.float64),
            pids=tuple(self.pids),
            tids=tuple(self.tids),
            process_names=self.process_names,
            process_labels=self.process_labels,
            thread_names=self.thread_names,
            base_ts=base,
            rank=rank,
        )


def iter_events(path: Path) -> Iterator[dict[str, Any]]:
    """Every event of the trace, streamed (object or bare-array layout, gzipped or not)."""
    head = _head(path)
    stripped = head.lstrip()
    if not stripped:
        raise WorkbenchError(f"{path}: empty trace file; the profiler did not write it (or is still writing it)")
    prefix = "item" if stripped[:1] == b"[" else "traceEvents.item"
    with open_text(path) as handle:
        yield from ijson.items(handle, prefix, use_float=True)


def read_trace(path: Path) -> TraceTable:
    """Stream `path` into a TraceTable; a truncated or malformed file is one WorkbenchError."""
    path = Path(path)
    builder = _Builder()
    rank = _rank_in_head(_head(path))
    try:
        builder.consume(iter_events(path))
    except (ijson.JSONError, ijson.IncompleteJSONError, EOFError, OSError, ValueError) as exc:
        raise WorkbenchError(
            f"{path}: the trace is truncated or not JSON ({type(exc).__name__}: {str(exc)[:120]}); "
            "wait until the profiler has finished writing it, or capture again"
        ) from None
    return builder.table(path, rank)
