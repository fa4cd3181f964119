"""What a load run's engine answered, for the output guard: the text of a sample of its streamed requests.

The load client recognises token chunks without parsing them (`client`), so a run keeps the raw event
payloads of its first `GUARD_SAMPLE` requests only and reads their text after the run, outside the timed
window. The guard (`workbench.serving.guard`) then says whether the engine talked nonsense: with synthetic
prompts and `ignore_eos` only the checks that no workload explains (empty, cut, NaN, a character run
on and on); with a trace's real requests every check.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from workbench.serving.guard import GuardFinding, GuardScope, GuardSummary, check_output
from workbench.serving.load.workload import Prompt

GUARD_SAMPLE = 64  # requests per run whose answers the guard reads


def stream_text(payloads: Sequence[bytes]) -> tuple[str, str | None, int]:
    """(text, finish reason, tool calls) of one streamed answer's first choice."""
    parts, finish, tools = [], None, 0
    for payload in payloads:
        if payload.strip() == b"[DONE]":
            continue
        try:
            event = json.loads(payload)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        for choice in event.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            parts.append(delta.get("content") or choice.get("text") or "")
            tools += len(delta.get("tool_calls") or ())
            finish = choice.get("finish_reason") or finish
    return "".join(parts), finish, tools


def guard_streams(kept: Mapping[int, Sequence[bytes]], prompts: Sequence[Prompt]) -> GuardSummary | None:
    """The guard's summary over the kept answers (None when none was kept)."""
    if not kept:
        return None
    findings: list[tuple[GuardFinding, ...]] = []
    for index, payloads in sorted(kept.items()):
        prompt = prompts[index % len(prompts)]
        synthetic = prompt.body is None or bool(prompt.body.get("ignore_eos"))
        text, finish, tools = stream_text(payloads)
        findings.append(
            check_output(
                text,
                prompt=None if synthetic else prompt.text,
                finish_reason=finish,
                tool_calls=tools,
                scope=GuardScope.SYNTHETIC if synthetic else GuardScope.FULL,
            )
        )
    return GuardSummary.of(findings)


__all__ = ["GUARD_SAMPLE", "guard_streams", "stream_text"]
