"""Timed length-only traces: Mooncake / AISBench, GuideLLM's trace files, GuideLLM's WEKA conversations.

Formats, as their own documentation defines them:

- `mooncake` — one JSON object per line: `timestamp` (ms from the first request), `input_length`,
  `output_length`, `hash_ids` (one per 512-token block). kvcache-ai/Mooncake FAST25-release/traces/*.jsonl;
  AISBench's `mooncake_trace` data set reads the same lines, and also `input_text` (the prompt itself) in
  place of `input_length` + `hash_ids` (AISBench/benchmark ais_bench/benchmark/configs/datasets/
  mooncake_trace/README.md).
- `guidellm` — GuideLLM's `trace_synthetic` format: the columns `timestamp` (s), `input_length`,
  `output_length`, renamed with --column (guidellm docs/guides/trace_replay.md, "Format-Agnostic Data
  Arguments"); with `hash_ids` it is GuideLLM's `mooncake` kind.
- `weka` — GuideLLM's WEKA kind (callanjfox/agentic-coding-analysis docs/TRACE_FORMAT.md): one conversation
  per line (or one JSON file), `id`, `block_size`, `requests` of `t` (s from the conversation's start), `in`,
  `out`, `hash_ids`, `think_time`; nested `type: subagent` entries carry `requests` of their own.

Each request becomes a streamed `/v1/completions` request (greedy, `ignore_eos`, `max_tokens` = the recorded
output length) whose prompt has the recorded input length (`blocks`). A WEKA conversation is a session: each
turn is sent after the previous one's answer, then its think time. `length_scale` shrinks every length and
the block size alike (a 30k-token production trace onto a 2k-context test model) and keeps the sharing.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.replay.imports.blocks import BlockPrompts
from workbench.serving.load.trace import Endpoint, TraceRecord


class LengthFormat(str, enum.Enum):
    MOONCAKE = "mooncake"
    GUIDELLM = "guidellm"
    WEKA = "weka"

    @property
    def seconds_per_unit(self) -> float:
        return 0.001 if self is LengthFormat.MOONCAKE else 1.0

    @property
    def block_size(self) -> int:
        return 512 if self is not LengthFormat.WEKA else 64  # Mooncake's blocks; WEKA files say their own


@dataclass(frozen=True)
class Columns:
    """Where a row keeps its fields (GuideLLM lets a trace name them: timestamp_column, ...)."""

    timestamp: str = "timestamp"
    input_length: str = "input_length"
    output_length: str = "output_length"
    hash_ids: str = "hash_ids"


@dataclass(frozen=True)
class LengthImport:
    format: LengthFormat
    length_scale: float = 1.0
    seconds_per_unit: float | None = None  # None: the format's own (Mooncake ms, GuideLLM and WEKA s)
    block_size: int | None = None  # None: the format's (or the WEKA file's)
    columns: Columns = Columns()
    limit: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.length_scale <= 1:
            raise WorkbenchError(f"--length-scale {self.length_scale}: choose a factor in (0, 1]")

    def scaled(self, length: int) -> int:
        return max(1, round(length * self.length_scale))


def _rows(path: Path) -> Iterator[tuple[int, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkbenchError(f"{path}: cannot be read as a trace ({exc}); check the path") from None
    stripped = text.strip()
    if stripped.startswith("{") and "\n{" not in stripped:  # one JSON document (a WEKA conversation file)
        try:
            yield 1, json.loads(stripped)
            return
        except json.JSONDecodeError:
            pass
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                raise WorkbenchError(
                    f"{path}, line {number}: not JSON ({exc.msg}); a trace is one object per line"
                ) from None


def _field(row: Mapping[str, Any], key: str, where: str, kind: type = int) -> Any:
    if key not in row:
        raise WorkbenchError(f"{where}: no {key!r} (keys: {', '.join(sorted(row))}); name the column with --column")
    try:
        return kind(row[key])
    except (TypeError, ValueError):
        raise WorkbenchError(f"{where}: {key!r} is {row[key]!r}, not a {kind.__name__}") from None


def _body(prompt: str, output_length: int) -> dict[str, Any]:
    return {
        "model": "",
        "prompt": prompt,
        "max_tokens": output_length,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": True,
    }


def flat_records(path: Path, spec: LengthImport, builder: BlockPrompts | None) -> list[TraceRecord]:
    """Mooncake / AISBench / GuideLLM rows: independent requests at their timestamps."""
    unit = spec.seconds_per_unit or spec.format.seconds_per_unit
    c, records, first = spec.columns, [], None
    for number, row in _rows(path):
        where = f"{path}, line {number}"
        if not isinstance(row, dict):
            raise WorkbenchError(f"{where}: each line is one JSON object")
        stamp = _field(row, c.timestamp, where, float) if c.timestamp in row or row.get("input_text") is None else 0.0
        first = stamp if first is None else first
        output = spec.scaled(int(row.get(c.output_length, 1)))
        if isinstance(row.get("input_text"), str):  # AISBench: the prompt itself
            prompt, length = row["input_text"], None
        else:
            length = spec.scaled(_field(row, c.input_length, where))
            if builder is None:
                raise WorkbenchError(
                    f"{where}: building prompts of recorded lengths needs the model's tokenizer; pass --tokenizer DIR"
                )
            prompt = builder.prompt([int(h) for h in row.get(c.hash_ids) or ()], length, number)
        lengths = {"input_tokens": length, "output_tokens": output} if length else {"output_tokens": output}
        records.append(
            TraceRecord(
                f"r{len(records) + 1:06d}",
                (stamp - first) * unit,
                Endpoint.COMPLETIONS,
                _body(prompt, output),
                source=spec.format.value,
                lengths=lengths,
            )
        )
        if spec.limit is not None and len(records) >= spec.limit:
            break
    return sorted(records, key=lambda r: r.arrival_s)


def _weka_turns(conversation: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The conversation's own requests; a subagent's requests follow as turns of the same session."""
    for request in conversation.get("requests") or ():
        if request.get("type") == "subagent":
            yield from _weka_turns(request)
        else:
            yield request


def weka_records(path: Path, spec: LengthImport, builder_for) -> list[TraceRecord]:
    """WEKA conversations: one session each, turns after the previous answer and the recorded think time."""
    records: list[TraceRecord] = []
    for number, conversation in _rows(path):
        where = f"{path}, conversation on line {number}"
        if not isinstance(conversation, dict) or "requests" not in conversation:
            raise WorkbenchError(f"{where}: a WEKA conversation is an object with 'requests' (docs/TRACE_FORMAT.md)")
        builder = builder_for(spec.block_size or int(conversation.get("block_size") or spec.format.block_size))
        session, parent, previous_end = f"s{number:05d}", None, None
        local = conversation.get("hash_id_scope") == "local"  # ids numbered per conversation, not shared
        for turn, request in enumerate(_weka_turns(conversation)):
            at = _field(request, "t", where, float) * (spec.seconds_per_unit or 1.0)
            length, output = spec.scaled(_field(request, "in", where)), spec.scaled(int(request.get("out", 1)))
            think = request.get("think_time")
            think_s = float(think) if think is not None else (max(at - previous_end, 0.0) if previous_end else None)
            record_id = f"r{len(records) + 1:06d}"
            hashes = [int(h) + (number << 32 if local else 0) for h in request.get("hash_ids") or ()]
            prompt = builder.prompt(hashes, length, len(records) + 1)
            records.append(
                TraceRecord(
                    record_id,
                    at,
                    Endpoint.COMPLETIONS,
                    _body(prompt, output),
                    session,
                    turn,
                    parent,
                    think_s if parent else None,
                    source="weka",
                    lengths={"input_tokens": length, "output_tokens": output},
                )
            )
            api_time = request.get("api_time")
            previous_end = at + float(api_time) if api_time is not None else at
            parent = record_id
            if spec.limit is not None and len(records) >= spec.limit:
                return records
    return records


def scaled_block(spec: LengthImport, block: int) -> int:
    return max(1, math.floor(block * spec.length_scale))


__all__ = ["Columns", "LengthFormat", "LengthImport", "flat_records", "scaled_block", "weka_records"]
