"""A vLLM server's request log (`--enable-log-requests`), turned into a trace.

vLLM has written requests in three shapes over its releases, all read here:

- up to about 0.11 (INFO), prompt and parameters on one line (vLLM #16361, #9023, kserve/kserve#4470):
      INFO 04-10 03:35:45 [logger.py:39] Received request chatcmpl-b654...: prompt: '<|im_start|>system\\n...',
      params: SamplingParams(n=1, ..., temperature=0.7, top_p=0.001, ..., max_tokens=32742, ...), prompt_token_ids: None, ...
- 0.32 (vllm/entrypoints/serve/utils/request_logger.py): INFO `Received request ID: params: SamplingParams(...)`,
  and at DEBUG `Request ID details: prompt: '...', prompt_token_ids: [...]` and
  `Request ID JSON body: {...}` — the request exactly as the client sent it;
- with `--enable-log-outputs`, `Generated response ID: output: '...', finish_reason: stop`: the answer.

The JSON body, when logged, is replayed as it was (chat or completions). Otherwise the logged prompt — the
chat template already applied — is replayed as a completions request with the logged sampling parameters, so
the model sees the same tokens. A line of the 0.32 INFO shape alone holds no prompt: such a log is refused
with the fix (log at DEBUG). Times come from the line's `MM-DD HH:MM:SS` (vLLM's logger, whole seconds).
"""

from __future__ import annotations

import ast
import datetime as dt
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.serving.load.trace import Answer, Choice, Endpoint, TraceRecord

_STAMP = re.compile(r"(?P<level>INFO|DEBUG|WARNING)\s+(?P<month>\d\d)-(?P<day>\d\d) (?P<time>\d\d:\d\d:\d\d)")
_RECEIVED = re.compile(r"Received request (?P<id>\S+?): (?P<rest>.*)$")
_BODY = re.compile(r"Request (?P<id>\S+) JSON body: (?P<json>\{.*\})\s*$")
_DETAILS = re.compile(r"Request (?P<id>\S+) details: prompt: (?P<rest>.*)$")
_OUTPUT = re.compile(r"Generated response (?P<id>\S+?)(?: \(streaming complete\))?: output: (?P<rest>.*)$")
_PARAMS = re.compile(r"SamplingParams\((?P<args>.*?)\)(?:, prompt_token_ids|, lora_request|\.?$)")
# SamplingParams fields that are request fields of the same name in vLLM's OpenAI API.
_REQUEST_FIELDS = (
    "n",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "max_tokens",
    "min_tokens",
    "stop",
    "stop_token_ids",
    "ignore_eos",
    "logprobs",
    "skip_special_tokens",
)


@dataclass
class _Entry:
    id: str
    seconds: float
    body: dict[str, Any] | None = None
    prompt: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    output: str | None = None
    finish: str | None = None


def request_key(request_id: str) -> str:
    """The id every line of one request shares: vLLM 0.32 logs the JSON body under the bare id and the other
    lines under 'chatcmpl-<id>' or 'cmpl-<id>-<prompt index>'."""
    if request_id.startswith("cmpl-"):
        return re.sub(r"-\d+$", "", request_id[len("cmpl-") :])
    return request_id.removeprefix("chatcmpl-")


def _seconds(match: re.Match[str]) -> float:
    """Seconds since the start of the year (vLLM's log lines carry no year; a trace only needs differences)."""
    hours, minutes, seconds = (int(x) for x in match["time"].split(":"))
    day = dt.date(2000, int(match["month"]), int(match["day"])).timetuple().tm_yday  # 2000: a leap year
    return ((day * 24 + hours) * 60 + minutes) * 60 + seconds


def _end_of_literal(text: str) -> int:
    """Where the literal at the start of `text` ends: at a ',' or an unopened ')' outside quotes and brackets."""
    depth, quote, i = 0, "", 0
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\":
                i += 1
            elif char == quote:
                quote = ""
                if depth == 0:
                    return i + 1
        elif char in "'\"":
            quote = char
        elif char in "[({":
            depth += 1
        elif char in "])}":
            if depth == 0:
                return i
            depth -= 1
        elif char == "," and depth == 0:
            return i
        i += 1
    return len(text)


def _literal(text: str) -> tuple[Any, str]:
    """The Python literal at the start of `text` (a repr'd string, list, number, None) and what follows it."""
    text = text.lstrip()
    end = _end_of_literal(text)
    try:
        return ast.literal_eval(text[:end]), text[end:]
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise ValueError(f"no literal at {text[:40]!r}") from None


def parse_params(text: str) -> dict[str, Any]:
    """'n=1, temperature=0.7, stop=[], ...' (a SamplingParams repr's arguments) -> the OpenAI request fields."""
    params, rest = {}, text
    while rest:
        match = re.match(r"\s*(\w+)=", rest)
        if not match:
            break
        try:
            value, rest = _literal(rest[match.end() :])
        except ValueError:  # a value that is not a literal (an object repr): skip to the next key
            nxt = re.search(r", (\w+)=", rest[match.end() :])
            rest = rest[match.end() + nxt.start() :].lstrip(", ") if nxt else ""
            continue
        params[match[1]] = value
        rest = rest.lstrip(", ")
    return {k: v for k, v in params.items() if k in _REQUEST_FIELDS and v is not None}


def _fold(entries: dict[str, _Entry], line: str, seconds: float) -> None:
    if match := _BODY.search(line):
        entry = entries.setdefault(request_key(match["id"]), _Entry(match["id"], seconds))
        try:
            entry.body = json.loads(match["json"])
        except json.JSONDecodeError:
            pass  # a body cut by --max-log-len: the prompt lines still serve
    elif match := _DETAILS.search(line):
        entries.setdefault(request_key(match["id"]), _Entry(match["id"], seconds)).prompt = _literal(match["rest"])[0]
    elif match := _RECEIVED.search(line):
        entry = entries.setdefault(request_key(match["id"]), _Entry(match["id"], seconds))
        entry.seconds = min(entry.seconds, seconds)
        if match["rest"].startswith("prompt: "):
            entry.prompt = _literal(match["rest"][len("prompt: ") :])[0]
        if params := _PARAMS.search(match["rest"]):
            entry.params = parse_params(params["args"])
    elif match := _OUTPUT.search(line):
        entry = entries.setdefault(request_key(match["id"]), _Entry(match["id"], seconds))
        entry.output, rest = _literal(match["rest"])
        finish = re.search(r"finish_reason: (\w+)", rest)
        # a streamed answer's closing line says 'streaming_complete', not why it ended: unknown
        entry.finish = finish[1] if finish and finish[1] not in ("None", "streaming_complete") else None


def _lines(path: Path) -> Iterator[str]:
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            yield from handle
    except OSError as exc:
        raise WorkbenchError(f"{path}: cannot read the log ({exc}); check the path") from None


def _record(entry: _Entry, start: float, number: int) -> TraceRecord:
    if entry.body is not None:
        endpoint = Endpoint.CHAT if "messages" in entry.body else Endpoint.COMPLETIONS
        body = dict(entry.body)
    else:
        endpoint = Endpoint.COMPLETIONS
        body = {"model": "", "prompt": entry.prompt, **entry.params}
    answer = None
    if entry.output is not None:
        answer = Answer(status=200, choices=(Choice(0, entry.output, entry.finish),))
    return TraceRecord(f"r{number:06d}", entry.seconds - start, endpoint, body, answer=answer, source="vllm-log")


def read_vllm_log(path: Path, limit: int | None = None) -> list[TraceRecord]:
    entries: dict[str, _Entry] = {}
    for line in _lines(Path(path)):
        if (stamp := _STAMP.search(line)) is not None:
            _fold(entries, line, _seconds(stamp))
    if not entries:
        raise WorkbenchError(f"{path}: no request lines; start vLLM with --enable-log-requests to log them")
    usable = [e for e in entries.values() if e.body is not None or e.prompt is not None]
    if not usable:
        raise WorkbenchError(
            f"{path}: {len(entries)} requests are logged without their prompt (vLLM >= 0.11 logs it at DEBUG); "
            "restart the server with VLLM_LOGGING_LEVEL=DEBUG and --enable-log-requests, then import the new log"
        )
    usable.sort(key=lambda e: e.seconds)
    start = usable[0].seconds
    records = [_record(e, start, n) for n, e in enumerate(usable, start=1)]
    return records[:limit] if limit is not None else records


__all__ = ["parse_params", "read_vllm_log"]
