"""The checklist's last step: one small request to a running OpenAI-compatible server.

Only when the user names a server (`server_url`): the pre-flight never starts one itself (that takes
minutes on a real model; the first-request notebook does it). The request is the smallest real one:
list the models, then one chat completion of a few tokens, so the whole path (HTTP, tokenizer, chat
template, device, sampling) is exercised.
"""

from __future__ import annotations

import httpx

from workbench.check.result import CheckResult, Group, failed, passed, skipped

G = Group.SERVING
PROMPT = "Reply with one word: what is the capital of France?"


def check_one_request(server_url: str | None, timeout_s: float = 60.0) -> CheckResult:
    name = "serving.one_request"
    if not server_url:
        return skipped(name, G, "no server_url given: start a server (first-request notebook) and pass its URL")
    base = server_url.rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    expected = "GET /v1/models lists a model and one chat completion returns text"
    try:
        with httpx.Client(timeout=timeout_s) as client:
            models = client.get(f"{base}/models")
            models.raise_for_status()
            listed = [m["id"] for m in models.json().get("data", [])]
            if not listed:
                return failed(
                    name,
                    G,
                    f"{base}/models lists no model",
                    expected,
                    "the server started without a model: check its --model / --served-model-name",
                )
            reply = client.post(
                f"{base}/chat/completions",
                json={
                    "model": listed[0],
                    "max_tokens": 8,
                    "temperature": 0,
                    "messages": [{"role": "user", "content": PROMPT}],
                },
            )
            reply.raise_for_status()
            text = reply.json()["choices"][0]["message"]["content"] or ""
    except httpx.HTTPStatusError as exc:
        body = exc.response.text[:300]
        return failed(
            name,
            G,
            f"{exc.request.method} {exc.request.url} -> HTTP {exc.response.status_code}: {body}",
            expected,
            "read the server log for the traceback of this request",
        )
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
        return failed(
            name,
            G,
            f"{base}: {type(exc).__name__}: {exc}",
            expected,
            "check that the server is up (curl <url>/v1/models) and the URL/port are right",
        )
    if not text.strip():
        return failed(
            name,
            G,
            f"model {listed[0]} answered with empty text",
            expected,
            "empty output on a chat request usually means a missing chat template or EOS at once",
        )
    return passed(name, G, f"model {listed[0]} answered {text.strip()[:60]!r}", expected)
