"""The first request (docs/METHOD.md §5, and the last step of the §14 pre-flight): is the server really serving?

`/health` only says the HTTP front end is up. The smoke check asks for real work, three ways:

1. `models`  GET /v1/models lists the served model.
2. `chat`    one non-streamed chat completion: non-empty text, a finish reason of stop/length, and a
             usage block whose counts add up.
3. `stream`  one streamed completion (SSE, usage included): content arrives in chunks, ends with a
             finish reason, and the usage block reports the generated tokens.

(plus `expect` when the caller names a word the answer must contain, e.g. "Paris"). Each check is a
`CheckResult` with a `CheckOutcome`; when a request fails although /health was fine, the report carries a
`CrashReport` of kind FALSE_READY (or the real crash, when a launched server died meanwhile).
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pandas as pd

from workbench.results.envelope import DocumentKind, write_result
from workbench.results.verdict import Verdict
from workbench.serving.client import list_models
from workbench.serving.crash import CrashReport, false_ready
from workbench.serving.server import AFTER_FAILED_REQUESTS_S, Server

SMOKE_KIND = DocumentKind("smoke")

DEFAULT_PROMPT = "What is the capital of France? Answer in one word."
DEFAULT_COMPLETION_PROMPT = "The capital of France is"
FINISH_REASONS = ("stop", "length")


class CheckOutcome(str, enum.Enum):
    """One smoke check's outcome; `verdict` puts it on the shared scale (a failed request is an error)."""

    PASS = "pass"
    FAIL = "fail"

    @property
    def verdict(self) -> Verdict:
        return CheckOutcome.PASS if self is CheckOutcome.PASS else Verdict.ERROR


@dataclass(frozen=True)
class CheckResult:
    name: str
    outcome: CheckOutcome
    detail: str
    seconds: float
    text: str = ""  # what the model answered, for the chat and stream checks
    request_ok: bool = True  # False when the HTTP request itself failed (not just its content)

    @property
    def passed(self) -> bool:
        return self.outcome is CheckOutcome.PASS


@dataclass(frozen=True)
class SmokeReport:
    url: str
    model: str
    checks: tuple[CheckResult, ...]
    diagnosis: CrashReport | None = None

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(check.passed for check in self.checks)

    @property
    def answer(self) -> str:
        """The chat check's answer ('' when it failed)."""
        return next((c.text for c in self.checks if c.name == "chat"), "")

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {
                    "check": c.name,
                    "verdict": c.outcome.value,
                    "detail": c.detail,
                    "text": c.text,
                    "seconds": round(c.seconds, 3),
                }
                for c in self.checks
            ]
        )

    def to_dict(self) -> dict[str, Any]:
        """What `smoke --json` writes (inside the result envelope)."""
        return {
            "url": self.url,
            "model": self.model,
            "passed": self.passed,
            "checks": self.to_frame().to_dict(orient="records"),
            "diagnosis": self.diagnosis.as_row() if self.diagnosis else None,
        }

    def write(self, path: Path) -> Path:
        """`smoke --json`: the checks, stamped as a `smoke` document with the server it asked."""
        from workbench.stack.provenance import provenance

        return write_result(path, self.to_dict(), provenance(url=self.url, model=self.model), SMOKE_KIND)

    def summary(self) -> str:
        status = "PASS" if self.passed else "FAIL"
        lines = [f"smoke {status}: {self.url} model={self.model}"]
        lines += [f"  {c.outcome.value:4s} {c.name:7s} {c.detail}" for c in self.checks]
        if self.diagnosis is not None:
            lines.append(f"  diagnosis: {self.diagnosis.message()}")
        return "\n".join(lines)


class CheckFailed(Exception):
    """Raised inside one check when the answer is wrong (never leaves this module)."""


class RequestFailed(CheckFailed):
    """Raised inside one check when the server did not answer the request with HTTP 200."""


def _usage_problem(usage: dict | None, max_tokens: int) -> str | None:
    if not usage:
        return "no usage block"
    prompt, completion, total = usage.get("prompt_tokens"), usage.get("completion_tokens"), usage.get("total_tokens")
    if not prompt or not completion:
        return f"usage counts missing or zero ({usage})"
    if completion > max_tokens:
        return f"completion_tokens {completion} exceeds max_tokens {max_tokens}"
    if total is not None and total != prompt + completion:
        return f"total_tokens {total} != prompt {prompt} + completion {completion}"
    return None


def _post_json(client: httpx.Client, url: str, payload: dict) -> dict:
    response = client.post(url, json=payload)
    if response.status_code != 200:
        raise RequestFailed(f"HTTP {response.status_code} from {url}: {response.text[:300]}")
    return response.json()


def check_models(client: httpx.Client, server: Server) -> tuple[str, str]:
    try:
        ids = [m.id for m in list_models(server.url, client=client)]
    except httpx.HTTPStatusError as exc:
        raise RequestFailed(f"HTTP {exc.response.status_code} from /v1/models: {exc.response.text[:300]}") from None
    if server.model not in ids:
        raise CheckFailed(f"/v1/models lists {ids}, not {server.model!r}")
    return f"serves {ids}", ""


def check_chat(client: httpx.Client, server: Server, prompt: str, max_tokens: int) -> tuple[str, str]:
    body = _post_json(
        client,
        f"{server.url}/v1/chat/completions",
        {
            "model": server.model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "temperature": 0.0,
        },
    )
    choice = (body.get("choices") or [{}])[0]
    text = (choice.get("message") or {}).get("content") or ""
    if not text.strip():
        raise CheckFailed(f"empty answer (finish_reason={choice.get('finish_reason')!r})")
    if choice.get("finish_reason") not in FINISH_REASONS:
        raise CheckFailed(f"finish_reason {choice.get('finish_reason')!r}, expected one of {FINISH_REASONS}")
    if problem := _usage_problem(body.get("usage"), max_tokens):
        raise CheckFailed(problem)
    usage = body["usage"]
    return f"{usage['completion_tokens']} tokens, finish_reason={choice['finish_reason']}", text


def check_stream(client: httpx.Client, server: Server, prompt: str, max_tokens: int) -> tuple[str, str]:
    payload = {
        "model": server.model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    pieces: list[str] = []
    finish_reason, usage, chunks = None, None, 0
    with client.stream("POST", f"{server.url}/v1/completions", json=payload) as response:
        if response.status_code != 200:
            raise RequestFailed(f"HTTP {response.status_code}: {response.read()[:300]!r}")
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[len("data: ") :])
            for choice in event.get("choices") or []:
                chunks += 1
                pieces.append(choice.get("text") or "")
                finish_reason = choice.get("finish_reason") or finish_reason
            usage = event.get("usage") or usage
    text = "".join(pieces)
    if not text.strip():
        raise CheckFailed(f"no text in {chunks} streamed chunks")
    if finish_reason not in FINISH_REASONS:
        raise CheckFailed(f"stream ended with finish_reason {finish_reason!r}")
    if problem := _usage_problem(usage, max_tokens):
        raise CheckFailed(problem)
    return f"{chunks} chunks, {usage['completion_tokens']} tokens, finish_reason={finish_reason}", text


def _timed(name: str, check: Callable[[], tuple[str, str]]) -> CheckResult:
    started = time.perf_counter()
    try:
        detail, text = check()
    except RequestFailed as exc:
        return CheckResult(name, CheckOutcome.FAIL, str(exc), time.perf_counter() - started, request_ok=False)
    except CheckFailed as exc:
        return CheckResult(name, CheckOutcome.FAIL, str(exc), time.perf_counter() - started)
    except (httpx.HTTPError, json.JSONDecodeError, KeyError, TypeError) as exc:
        detail = f"{type(exc).__name__}: {exc}"
        return CheckResult(name, CheckOutcome.FAIL, detail, time.perf_counter() - started, request_ok=False)
    return CheckResult(name, CheckOutcome.PASS, detail, time.perf_counter() - started, text)


def run_smoke(
    server: Server,
    *,
    prompt: str = DEFAULT_PROMPT,
    completion_prompt: str = DEFAULT_COMPLETION_PROMPT,
    max_tokens: int = 32,
    expect: str | None = None,
    timeout_s: float = 120.0,
) -> SmokeReport:
    """Run the three checks (and `expect`) against a healthy server; never raises for a failed check."""
    with httpx.Client(timeout=timeout_s) as client:
        checks = [
            _timed("models", lambda: check_models(client, server)),
            _timed("chat", lambda: check_chat(client, server, prompt, max_tokens)),
            _timed("stream", lambda: check_stream(client, server, completion_prompt, max_tokens)),
        ]
    if expect is not None:
        answer = checks[1].text
        found = expect.lower() in answer.lower()
        checks.append(
            CheckResult(
                "expect",
                CheckOutcome.PASS if found else CheckOutcome.FAIL,
                f"{expect!r} {'found' if found else 'not found'} in the chat answer",
                0.0,
                answer,
            )
        )
    failed = next((c for c in checks if not c.request_ok), None)
    # a launched server that died meanwhile explains everything
    diagnosis = server.diagnose(wait_s=AFTER_FAILED_REQUESTS_S if failed else 0.0)
    if diagnosis is None and failed is not None:
        diagnosis = false_ready(f"{failed.name}: {failed.detail}", server.log_text(), server.log_path)
    return SmokeReport(server.url, server.model, tuple(checks), diagnosis)
