"""The one-request check against a small local HTTP server speaking the OpenAI routes it uses."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from workbench.check.result import Status
from workbench.check.serving import check_one_request


def serve(models: list[str], answer: str | None, status: int = 200):
    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802
            self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in models]})

        def do_POST(self):  # noqa: N802
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if status != 200:
                self._send(status, {"error": "boom"})
                return
            assert request["model"] == models[0] and request["messages"][0]["role"] == "user"
            self._send(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": answer}}]})

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def server_factory():
    servers = []

    def make(*args, **kwargs):
        servers.append(serve(*args, **kwargs))
        return f"http://127.0.0.1:{servers[-1].server_address[1]}"

    yield make
    for s in servers:
        s.shutdown()
        s.server_close()


def test_answer_passes(server_factory):
    result = check_one_request(server_factory(["tiny"], "Paris"))
    assert result.status is Status.PASS and "'Paris'" in result.observed


@pytest.mark.parametrize(
    "models, answer, status, needle",
    [([], "x", 200, "lists no model"), (["tiny"], "", 200, "empty text"), (["tiny"], "x", 500, "HTTP 500")],
)
def test_bad_servers_fail(server_factory, models, answer, status, needle):
    result = check_one_request(server_factory(models, answer, status) + "/v1")
    assert result.status is Status.FAIL and needle in result.observed


def test_nothing_listening_and_no_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = check_one_request(f"http://127.0.0.1:{port}", timeout_s=5)
    assert result.status is Status.FAIL and "ConnectError" in result.observed
    assert check_one_request(None).status is Status.SKIP
