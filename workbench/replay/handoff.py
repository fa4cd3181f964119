"""From the acceptance test to the cause: every `different` request of a replay becomes a twin case.

`to_twin` writes the different requests as a data set (`workbench.evaluate.datasets`' JSONL schema: chat
messages or a prompt; `twin --prompts` reads it) and builds the one `ascend-workbench twin` command that
sends them, as the same token ids, greedy, with logprobs, to the reference and the new configuration: the
first diverging token of each, then — when both sides are recipes — the first diverging module, its op and
a single-op repro (docs/METHOD.md §17). `--max-tokens` covers the latest first divergence the replay saw.

A twin run compares greedy completions of the rendered prompts, so a request's `tools` and `response_format`
do not travel: the divergence it hunts is in the numbers, not in the request's options. Chat messages keep
their text; tool results and other roles that the data-set schema does not hold are left out.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.replay.parity import Parity, RequestVerdict
from workbench.results.files import write_text
from workbench.serving.load.trace import Endpoint, TraceRecord, message_text

TWIN_PROMPTS_FILE = "twin_prompts.jsonl"
MIN_TOKENS, MAX_TOKENS = 8, 256
_ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class TwinHandoff:
    prompts: Path
    cases: tuple[str, ...]
    max_tokens: int
    command: str

    def text(self) -> str:
        return f"{len(self.cases)} different requests -> {self.prompts}\n  {self.command}"


def twin_problem(record: TraceRecord) -> dict[str, Any]:
    """One twin case in the data-set schema (see the module docstring for what is left out)."""
    if record.endpoint is Endpoint.COMPLETIONS:
        prompt = record.body.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise WorkbenchError(f"request {record.id}: a token-id prompt cannot travel to a twin run as text")
        return {"id": record.id, "prompt": prompt}
    messages = [
        {"role": m["role"], "content": message_text(m)}
        for m in record.body.get("messages") or ()
        if m.get("role") in _ROLES and message_text(m)
    ]
    return {"id": record.id, "messages": messages}


def side_flags(target: str | None, label: str) -> list[str]:
    """'--url U' for a URL, '--recipe R' for a recipe name or file; a missing side is named in the error."""
    if not target:
        raise WorkbenchError(
            f"the twin command needs the {label} configuration: pass it (a URL or a serving recipe) to hand off"
        )
    return ["--url", target] if target.startswith(("http://", "https://")) else ["--recipe", target]


def to_twin(
    verdicts: Sequence[RequestVerdict],
    records: Sequence[TraceRecord],
    out: Path,
    *,
    reference: str | None,
    candidate: str | None,
    parity: Parity = Parity.DIFFERENT,
) -> TwinHandoff | None:
    """Write the twin data set of the `parity` requests and the command; None when there is none."""
    wanted = {v.id: v for v in verdicts if v.parity is parity}
    chosen = [r for r in records if r.id in wanted]
    if not chosen:
        return None
    problems = [twin_problem(r) for r in chosen]
    path = write_text(
        Path(out) / TWIN_PROMPTS_FILE, "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in problems)
    )
    latest = max((wanted[r.id].position or 0 for r in chosen), default=0)
    max_tokens = min(max(latest + 4, MIN_TOKENS), MAX_TOKENS)
    argv = [
        "ascend-workbench",
        "twin",
        *side_flags(reference, "reference"),
        *side_flags(candidate, "candidate"),
        "--prompts",
        str(path),
        "--max-tokens",
        str(max_tokens),
        "--batch",
        "1",
    ]
    return TwinHandoff(path, tuple(r.id for r in chosen), max_tokens, shlex.join(argv))


__all__ = ["TWIN_PROMPTS_FILE", "TwinHandoff", "side_flags", "to_twin", "twin_problem"]
