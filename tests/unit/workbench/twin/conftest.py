"""A fake OpenAI-compatible completions server whose greedy choices and logprobs are known exactly.

The "model" picks, after a context, token (31 * sum(context) + len(context)) % VOCAB with logprob -1.0;
its runner-up is the next token id with logprob -1.0 - margin, where margin is NEAR (a near tie) at
positions in `near_positions` and FAR otherwise; two more runners-up sit at -6 and -7. A `flip` at
(prompt's first token, position) makes this server choose the runner-up there instead (its margin for it
mirrored), so two servers diverge exactly where a test says, by a gap of 2 x margin. `fail_groups` makes
the server refuse requests (HTTP 500) while set.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

VOCAB = 50
NEAR, FAR = 0.004, 2.0


def greedy(context: list[int], near_positions: set[int], generated: int) -> tuple[int, int, float]:
    """(chosen token, runner-up, margin) after `context` when `generated` tokens were generated."""
    chosen = (31 * sum(context) + len(context)) % VOCAB
    margin = NEAR if generated in near_positions else FAR
    return chosen, (chosen + 1) % VOCAB, margin


class FakeServer:
    def __init__(self, *, near_positions=(), flips=(), drift: float = 0.0):
        self.near_positions = set(near_positions)
        self.flips = set(flips)  # (first prompt token, position)
        self.drift = drift  # added to every chosen logprob: numeric drift without a token change
        self.fail = threading.Event()
        self.requests: list[dict] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/health":
                    self._send(200, {})
                elif self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": "fake", "object": "model", "root": "fake"}]})
                else:
                    self._send(404, {"error": "no"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/tokenize":
                    tokens = [ord(c) % VOCAB for c in body["prompt"]][:12]
                    self._send(200, {"tokens": tokens, "count": len(tokens), "max_model_len": 4096})
                    return
                owner.requests.append(body)
                if owner.fail.is_set():
                    self._send(500, {"error": {"message": "injected failure"}})
                    return
                self._send(200, {"choices": [owner.choice(i, p, body) for i, p in enumerate(body["prompt"])]})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def choice(self, index: int, prompt: list[int], body: dict) -> dict:
        context, ids, chosen_lp, tops = list(prompt), [], [], []
        for position in range(body["max_tokens"]):
            chosen, runner, margin = greedy(context, self.near_positions, position)
            if (prompt[0], position) in self.flips:
                chosen, runner = runner, chosen
            top = {
                chosen: -1.0 + self.drift,
                runner: -1.0 - margin,
                (chosen + 7) % VOCAB: -6.0,
                (chosen + 9) % VOCAB: -7.0,
            }
            ids.append(chosen)
            chosen_lp.append(top[chosen])
            tops.append({f"token_id:{k}": v for k, v in list(top.items())[: body["logprobs"]]})
            context.append(chosen)
        return {
            "index": index,
            "text": "",
            "token_ids": ids,
            "finish_reason": "length",
            "logprobs": {"token_logprobs": chosen_lp, "top_logprobs": tops, "tokens": [], "text_offset": []},
        }

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake_server():
    servers: list[FakeServer] = []

    def make(**kwargs) -> FakeServer:
        servers.append(FakeServer(**kwargs))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


@pytest.fixture
def prompts(tmp_path) -> Path:
    """Four prompts whose first characters differ, so each prompt's first token id differs and a flip can be
    placed on one prompt: 'a' -> 47, 'b' -> 48, 'c' -> 49, 'd' -> 0 (the fake /tokenize: ord(c) % 50)."""
    path = tmp_path / "prompts.jsonl"
    lines = [{"id": f"p{i}", "prompt": f"{c} quick prompt number {i}"} for i, c in enumerate("abcd")]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path
