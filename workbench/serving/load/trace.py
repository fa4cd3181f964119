"""The trace format: a service's own requests, when they came, how conversations chain, what was answered.

One JSON object per line (JSONL), each stamped `{"kind": "trace", "schema_version": 1}` (`TRACE_KIND`).
Written by `ascend-workbench capture` (the recording proxy, or an import of Mooncake / GuideLLM / vLLM
request logs); read by `replay`, and as a workload by `bench --trace`, `sweep` (`workload: {trace: ...}`),
`twin --perf --prompts` (`workbench.twin.perf.trace_load`), and `twin --prompts` / `evaluate --dataset`
(through `workbench.evaluate.datasets`). docs/replay.md is the reference; a line looks like:

    {"kind": "trace", "schema_version": 1,
     "id": "r000012",                    unique in the file
     "arrival_s": 3.208,                 seconds from the trace's first request
     "endpoint": "chat",                 chat (/v1/chat/completions) | completions (/v1/completions)
     "body": {...},                      the request body exactly as the client sent it
     "session": "s0003", "turn": 1,      a conversation (null when the request stands alone), turn from 0
     "parent": "r000009",                the request whose messages this one extends
     "think_s": 0.84,                    gap from the parent's answer to this request; set: send after it
     "answer": {...} | null,             what the service answered (below); null for imported traces
     "source": "capture",                capture | mooncake | guidellm | vllm-log
     "lengths": {"input_tokens": 655, "output_tokens": 52}}   optional: counts the source recorded

    answer = {"status": 200, "error": null, "ttft_s": 0.081, "e2e_s": 0.644, "usage": {...},
              "logprobs_source": "shadow",      client (the client asked) | shadow (asked by the proxy) | null
              "choices": [{"index": 0, "text": "...", "finish_reason": "stop",
                           "tool_calls": [{"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}],
                           "logprobs": {"tokens": ["token_id:504", ...], "logprobs": [-0.02, ...],
                                        "top": [{"token_id:504": -0.02, "token_id:88": -4.1}, ...]},
                           "score": {"token_ids": [...], "logprobs": [...]},      score: sampled requests
                           "alternate": {"text": ..., "tool_calls": [...], "logprobs": {...}}}]}
                                       alternate: the answer a second, shadow ask of a greedy request gave, when
                                       it differed from the client's (the configuration's own noise)

Version rule (`workbench.results.envelope`): a change a reader of version 1 would misread bumps the
version; a new optional key does not. This module only holds the format: reading, writing, and the few
facts every consumer asks of a record (its request class, greedy or sampled, its prompt text).
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.results.envelope import DocumentKind
from workbench.results.jsonl import JsonlLog
from workbench.serving.load.workload import Prompt, Workload

TRACE_KIND = DocumentKind("trace", 1)
TRACE_FILE = "trace.jsonl"  # the name `capture` writes inside its --out directory


class Endpoint(str, enum.Enum):
    CHAT = "chat"
    COMPLETIONS = "completions"

    @property
    def path(self) -> str:
        return "/v1/chat/completions" if self is Endpoint.CHAT else "/v1/completions"

    @classmethod
    def of_path(cls, path: str) -> Endpoint | None:
        """'/v1/chat/completions' -> CHAT, '/v1/completions' -> COMPLETIONS, anything else None."""
        return {e.path: e for e in cls}.get("/" + path.strip("/"))


class LogprobsSource(str, enum.Enum):
    CLIENT = "client"  # the client asked for logprobs itself: they are part of what it received
    SHADOW = "shadow"  # the proxy asked the same greedy request again, with logprobs, off the client's path


@dataclass(frozen=True)
class TokenLogprobs:
    """One choice's generated tokens: their keys ("token_id:N", or the text when the client asked in text),
    each chosen token's logprob, and the runners-up per position (key -> logprob, the chosen one included)."""

    tokens: tuple[str, ...]
    logprobs: tuple[float, ...]
    top: tuple[dict[str, float], ...]

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> TokenLogprobs:
        return cls(
            tuple(str(t) for t in raw["tokens"]),
            tuple(_number(v) for v in raw["logprobs"]),
            tuple({str(k): _number(v) for k, v in entry.items()} for entry in raw["top"]),
        )


@dataclass(frozen=True)
class Score:
    """The log-likelihood of an answer under a service: its token ids and each token's logprob there."""

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Score:
        return cls(tuple(int(t) for t in raw["token_ids"]), tuple(_number(v) for v in raw["logprobs"]))


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # the JSON text as the service produced it


@dataclass(frozen=True)
class Alternate:
    """Another answer the recorded service gave to the same greedy request when the proxy asked it again:
    the configuration's own run-to-run noise, and an answer a replay may match (`workbench.replay.parity`)."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    logprobs: TokenLogprobs | None = None


def _tool_calls(raw: Any) -> tuple[ToolCall, ...]:
    return tuple(ToolCall(str(c["name"]), str(c["arguments"])) for c in raw or ())


@dataclass(frozen=True)
class Choice:
    index: int
    text: str
    finish_reason: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    logprobs: TokenLogprobs | None = None
    score: Score | None = None
    alternate: Alternate | None = None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Choice:
        other = raw.get("alternate")
        return cls(
            index=int(raw.get("index", 0)),
            text=str(raw.get("text") or ""),
            finish_reason=raw.get("finish_reason"),
            tool_calls=_tool_calls(raw.get("tool_calls")),
            logprobs=TokenLogprobs.from_dict(raw["logprobs"]) if raw.get("logprobs") else None,
            score=Score.from_dict(raw["score"]) if raw.get("score") else None,
            alternate=Alternate(
                str(other.get("text") or ""),
                _tool_calls(other.get("tool_calls")),
                TokenLogprobs.from_dict(other["logprobs"]) if other.get("logprobs") else None,
            )
            if other
            else None,
        )


@dataclass(frozen=True)
class Answer:
    """What the service answered one request, and how long it took (seconds, as the client saw it)."""

    status: int
    choices: tuple[Choice, ...] = ()
    usage: dict[str, Any] | None = None
    ttft_s: float | None = None  # streamed requests only: first chunk that carries content
    e2e_s: float | None = None
    error: str | None = None
    logprobs_source: LogprobsSource | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.status == 200

    @property
    def output_tokens(self) -> int | None:
        value = (self.usage or {}).get("completion_tokens")
        return int(value) if value is not None else None

    @property
    def tpot_s(self) -> float | None:
        """(E2E - TTFT) / (output tokens - 1), vLLM's definition; None without a TTFT or with one token."""
        tokens = self.output_tokens
        if self.ttft_s is None or self.e2e_s is None or tokens is None or tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (tokens - 1)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["logprobs_source"] = self.logprobs_source.value if self.logprobs_source else None
        return data

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Answer:
        source = raw.get("logprobs_source")
        return cls(
            status=int(raw["status"]),
            choices=tuple(Choice.from_dict(c) for c in raw.get("choices") or ()),
            usage=dict(raw["usage"]) if raw.get("usage") else None,
            ttft_s=_optional(raw.get("ttft_s")),
            e2e_s=_optional(raw.get("e2e_s")),
            error=raw.get("error"),
            logprobs_source=LogprobsSource(source) if source else None,
        )


@dataclass(frozen=True)
class TraceRecord:
    """One request of a trace (see the module docstring for every field)."""

    id: str
    arrival_s: float
    endpoint: Endpoint
    body: dict[str, Any]
    session: str | None = None
    turn: int = 0
    parent: str | None = None
    think_s: float | None = None
    answer: Answer | None = None
    source: str = "capture"
    lengths: dict[str, int] = field(default_factory=dict)

    @property
    def greedy(self) -> bool:
        """Temperature 0 (or top_k 1) written in the request. Without it the server's default decides,
        which samples for most models, so such a request is judged as a distribution, never token by token."""
        temperature = self.body.get("temperature")
        return (temperature is not None and float(temperature) == 0.0) or self.body.get("top_k") == 1

    @property
    def request_class(self) -> str:
        """What kind of request this is, for latency and parity tables: tools, json, followup, chat, completion."""
        if self.body.get("tools"):
            return "tools"
        if (self.body.get("response_format") or {}).get("type") in ("json_schema", "json_object"):
            return "json"
        if self.endpoint is Endpoint.COMPLETIONS:
            return "completion"
        return "followup" if self.turn > 0 else "chat"

    @property
    def after_parent(self) -> bool:
        """Sent only once the parent's answer came back (a follow-up turn quotes that answer)."""
        return self.parent is not None and self.think_s is not None

    def prompt_text(self) -> str:
        """The last user message (chat) or the prompt (completions), as text: what the answer responds to."""
        if self.endpoint is Endpoint.COMPLETIONS:
            prompt = self.body.get("prompt")
            return prompt if isinstance(prompt, str) else ""
        users = [m for m in self.body.get("messages") or () if m.get("role") == "user"]
        return message_text(users[-1]) if users else ""

    def to_dict(self) -> dict[str, Any]:
        data = {
            "id": self.id,
            "arrival_s": round(self.arrival_s, 6),
            "endpoint": self.endpoint.value,
            "body": self.body,
            "session": self.session,
            "turn": self.turn,
            "parent": self.parent,
            "think_s": None if self.think_s is None else round(self.think_s, 6),
            "answer": self.answer.to_dict() if self.answer else None,
            "source": self.source,
        }
        return data | ({"lengths": dict(self.lengths)} if self.lengths else {})

    def to_line(self) -> dict[str, Any]:
        return TRACE_KIND.stamp() | self.to_dict()

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> TraceRecord:
        if not TRACE_KIND.matches(raw):
            raise ValueError("not stamped kind 'trace'")
        body = raw["body"]
        if not isinstance(body, dict):
            raise ValueError("'body' is not a JSON object")
        return cls(
            id=str(raw["id"]),
            arrival_s=float(raw["arrival_s"]),
            endpoint=Endpoint(raw["endpoint"]),
            body=body,
            session=raw.get("session"),
            turn=int(raw.get("turn") or 0),
            parent=raw.get("parent"),
            think_s=_optional(raw.get("think_s")),
            answer=Answer.from_dict(raw["answer"]) if raw.get("answer") else None,
            source=str(raw.get("source") or "capture"),
            lengths={str(k): int(v) for k, v in (raw.get("lengths") or {}).items()},
        )


def message_text(message: Mapping[str, Any]) -> str:
    """A chat message's text: its string content, or its text parts joined (multi-part content)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else ()
    return "\n".join(str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text")


def _number(value: Any) -> float:
    """A logprob as written: a number, or NaN / Infinity (JSON cannot spell them, Python's json writes them)."""
    return float(value) if value is not None else math.nan


def _optional(value: Any) -> float | None:
    return None if value is None else float(value)


# -- files -------------------------------------------------------------------------------------------


def trace_path(path: Path | str) -> Path:
    """A trace file, or the `capture --out` directory holding `trace.jsonl`."""
    path = Path(path).expanduser()
    return path / TRACE_FILE if path.is_dir() else path


def _first_line(path: Path) -> Any:
    """The first non-blank line of `path` parsed as JSON; None when there is none or it is not JSON."""
    try:
        with path.open(encoding="utf-8") as handle:
            first = next((line for line in handle if line.strip()), "")
        return json.loads(first) if first else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None


def is_trace_file(path: Path | str) -> bool:
    """Whether the first line of `path` is stamped as a trace line (the format's own reader decides)."""
    return TRACE_KIND.matches(_first_line(trace_path(path)))


def read_trace(path: Path | str, limit: int | None = None) -> tuple[TraceRecord, ...]:
    """Every record of a trace file in arrival order (the first `limit`), or one error naming the file and fix.

    A damaged line is reported and skipped (`workbench.results.jsonl`); a file without a single trace line is
    refused, with the import command for the formats users already have.
    """
    path = trace_path(path)
    if not path.is_file():
        raise WorkbenchError(f"{path}: no trace there; record one with `ascend-workbench capture` or import one")
    first = _first_line(path)
    if not TRACE_KIND.matches(first):
        raise WorkbenchError(
            f"{path}: not a trace (its lines are not stamped kind 'trace'); a Mooncake, GuideLLM or vLLM log file is "
            "imported first: ascend-workbench capture --import FORMAT FILE --out DIR"
        )
    TRACE_KIND.check(first, path)  # a newer layout is refused with the fix, never half read
    contents = JsonlLog(path).read(TraceRecord.from_dict)
    if not contents.records:
        raise WorkbenchError(f"{path}: holds no readable trace line; every line is damaged (see the warnings)")
    ids = [r.id for r in contents.records]
    if len(set(ids)) != len(ids):
        duplicate = next(i for i in ids if ids.count(i) > 1)
        raise WorkbenchError(f"{path}: request id {duplicate!r} appears twice; ids must be unique in a trace")
    records = sorted(contents.records, key=lambda r: (r.arrival_s, r.id))
    return tuple(records[:limit] if limit is not None else records)


def write_trace(path: Path | str, records: Iterable[TraceRecord]) -> Path:
    """Write a whole trace (an import); the capture proxy appends through `JsonlLog` as requests finish."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r.to_line(), ensure_ascii=False, separators=(",", ":")) for r in records]
    from workbench.results.files import write_text

    return write_text(path, "\n".join(lines) + ("\n" if lines else ""))


def _recorded_tokens(record: TraceRecord, key: str, usage_key: str) -> int:
    """A length the trace recorded (an import's counts, else the answer's usage); the output falls back to
    the request's max_tokens, the input to 0 (unknown: a streamed answer without usage)."""
    usage = (record.answer.usage or {}) if record.answer is not None else {}
    fallback = record.body.get("max_tokens") if key == "output_tokens" else 0
    return int(record.lengths.get(key) or usage.get(usage_key) or fallback or 0)


def recorded_lengths(record: TraceRecord) -> tuple[int, int]:
    """(input tokens, output tokens) the trace recorded for `record`; 0 where it recorded none."""
    return (
        _recorded_tokens(record, "input_tokens", "prompt_tokens"),
        _recorded_tokens(record, "output_tokens", "completion_tokens"),
    )


def trace_prompts(records: Sequence[TraceRecord]) -> list[Prompt]:
    """A trace as the load generator's prompts: each request's own body, endpoint and arrival offset."""
    return [
        Prompt(
            r.prompt_text(),
            _recorded_tokens(r, "input_tokens", "prompt_tokens"),
            body=r.body,
            path=r.endpoint.path,
            offset_s=r.arrival_s,
        )
        for r in records
    ]


def trace_workload(records: Sequence[TraceRecord], speed: float = 1.0, **fields: Any) -> Workload:
    """The load shape of a trace: all its requests at their own times, `speed` times faster; the mean
    recorded lengths stand for input_len / output_len in tables and labels."""
    if not records:
        raise WorkbenchError("the trace holds no requests to send")
    mean_in = sum(_recorded_tokens(r, "input_tokens", "prompt_tokens") for r in records) / len(records)
    mean_out = sum(_recorded_tokens(r, "output_tokens", "completion_tokens") for r in records) / len(records)
    return Workload(
        input_len=max(1, round(mean_in)),
        output_len=max(1, round(mean_out)),
        num_prompts=len(records),
        trace_speed=speed,
        **fields,
    )


def class_counts(records: Sequence[TraceRecord]) -> dict[str, int]:
    """How many requests of each class (see `TraceRecord.request_class`)."""
    counts: dict[str, int] = {}
    for record in records:
        counts[record.request_class] = counts.get(record.request_class, 0) + 1
    return counts


__all__ = [
    "Alternate",
    "Answer",
    "Choice",
    "Endpoint",
    "LogprobsSource",
    "Score",
    "TRACE_FILE",
    "TRACE_KIND",
    "TokenLogprobs",
    "ToolCall",
    "TraceRecord",
    "class_counts",
    "is_trace_file",
    "message_text",
    "read_trace",
    "recorded_lengths",
    "trace_path",
    "trace_prompts",
    "trace_workload",
    "write_trace",
]
