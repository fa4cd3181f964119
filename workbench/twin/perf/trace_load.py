"""A replay trace as the performance twin's load: the service's own requests, the same on both sides.

    workload = PerfWorkload.of_trace("runs/capture/prod", num_prompts=64, concurrency=8)

Every window sends the trace's first `num_prompts` requests (the trace format: docs/replay.md), each with its
recorded body — chat or completions, tools, `response_format`, sampling parameters — at the twin's
`concurrency` (closed loop: the recorded arrival times are `replay`'s and `bench --trace`'s business; a twin
compares two sides under the same offered load). Each request decodes exactly its recorded output length
(`max_tokens` set to it, `ignore_eos`), so both sides do the same work whatever they answer; at least 2
tokens, because a one-token answer has no TPOT. Its request class is the trace's own
(`TraceRecord.request_class`: chat, followup, tools, json, completion), so ΔTTFT and ΔTPOT come per class.
A request whose body holds no prompt gets one rebuilt at its recorded input length from the side's
tokenizer (`build_prompts`), so an import that kept lengths only still loads both sides alike.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.serving.load.trace import (
    Endpoint,
    TraceRecord,
    class_counts,
    is_trace_file,
    read_trace,
    recorded_lengths,
    trace_path,
)
from workbench.serving.load.workload import Prompt, build_prompts

MIN_OUTPUT_TOKENS = 2  # TPOT is (E2E - TTFT) / (tokens - 1): a one-token answer has none


def _has_prompt(record: TraceRecord) -> bool:
    """Whether the recorded body carries what the model reads: messages (chat) or a prompt (text or token ids)."""
    key = "messages" if record.endpoint is Endpoint.CHAT else "prompt"
    return bool(record.body.get(key))


@dataclass(frozen=True)
class TraceLoad:
    """The first requests of a trace file, as every window of a performance twin sends them."""

    path: Path
    records: tuple[TraceRecord, ...] = field(repr=False)

    def __post_init__(self) -> None:
        if not self.records:
            raise WorkbenchError(f"--prompts {self.path}: the trace holds no requests to send")
        for record in self.records:
            input_tokens, output_tokens = recorded_lengths(record)
            if output_tokens < 1:
                raise WorkbenchError(
                    f"--prompts {self.path}: request {record.id} records no output length (no usage, lengths or "
                    "max_tokens), so the sides cannot decode the same number of tokens; capture the trace again, or "
                    "import it with its output lengths"
                )
            if not _has_prompt(record) and input_tokens < 1:
                raise WorkbenchError(
                    f"--prompts {self.path}: request {record.id} has neither a prompt nor a recorded input length; "
                    "capture the trace again, or import it with its input lengths"
                )

    @classmethod
    def read(cls, path: str | Path, limit: int | None = None) -> TraceLoad:
        """The first `limit` requests of the trace at `path` (a file, or a `capture --out` directory)."""
        if not is_trace_file(path):
            raise WorkbenchError(
                f"--prompts {path}: with --perf, --prompts takes a replay trace (docs/replay.md), and this is none "
                "(a data set name, or a file whose lines are not stamped kind 'trace'); record one with "
                "`ascend-workbench capture`, import one with `capture --import FORMAT FILE --out DIR`, or leave "
                "--prompts out for the synthetic load of --input-len classes"
            )
        return cls(trace_path(path), read_trace(path, limit))

    def request_classes(self) -> tuple[str, ...]:
        """Each request's class, in the order they are sent."""
        return tuple(r.request_class for r in self.records)

    def input_lens(self) -> tuple[int, ...]:
        return tuple(recorded_lengths(r)[0] for r in self.records)

    def output_lens(self) -> tuple[int, ...]:
        """The tokens each request decodes: its recorded output length, at least `MIN_OUTPUT_TOKENS`."""
        return tuple(max(MIN_OUTPUT_TOKENS, recorded_lengths(r)[1]) for r in self.records)

    def digest(self) -> str:
        """A fingerprint of the requests sent: a resumed twin refuses a trace that changed under it."""
        text = json.dumps([r.to_dict() for r in self.records], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "requests": len(self.records),
            "digest": self.digest(),
            "classes": class_counts(self.records),
        }

    def prompts(self, tokenizer: Any, seed: int) -> list[Prompt]:
        """The requests as the load generator sends them: each body at its fixed output length, in trace order."""
        return [
            self._prompt(record, tokenizer, seed + i, output_len)
            for i, (record, output_len) in enumerate(zip(self.records, self.output_lens(), strict=True))
        ]

    @staticmethod
    def _prompt(record: TraceRecord, tokenizer: Any, seed: int, output_len: int) -> Prompt:
        input_tokens = recorded_lengths(record)[0]
        body = dict(record.body) | {"max_tokens": output_len, "ignore_eos": True}
        if "max_completion_tokens" in body:  # vLLM prefers it to max_tokens when both are set
            body["max_completion_tokens"] = output_len
        text = record.prompt_text()
        if not _has_prompt(record):
            text = build_prompts(tokenizer, 1, input_tokens, seed=seed)[0].text
            if record.endpoint is Endpoint.COMPLETIONS:
                body["prompt"] = text
            else:
                body["messages"] = [{"role": "user", "content": text}]
        return Prompt(text, input_tokens, body=body, path=record.endpoint.path)


__all__ = ["MIN_OUTPUT_TOKENS", "TraceLoad"]
