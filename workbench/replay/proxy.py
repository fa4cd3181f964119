"""The capture proxy: an OpenAI-compatible recording proxy to put in front of the service being migrated.

Every request is forwarded to the upstream untouched — method, path, query, headers (hop-by-hop ones
aside) and body bytes — and the upstream's status, headers and body bytes come back to the client as
they arrive, streamed chunk by chunk for server-sent events. The client receives what it would have
received without the proxy; `tests/unit/workbench/replay/test_proxy.py` checks it byte for byte. Nothing
is decompressed or re-encoded: aiohttp's automatic decompression and its own Accept-Encoding are off, and
uvicorn's own `date` and `server` headers are off so the upstream's pass through.

`POST /v1/chat/completions` and `POST /v1/completions` are recorded (`workbench.replay.recorder`); every
other path (/v1/models, /health, /tokenize, ...) is only forwarded. The app is plain ASGI (no framework
between uvicorn and the bytes) and the upstream client is aiohttp, whose C parser costs the least CPU
per streamed chunk (see `workbench.serving.load.client`); `benchmarks/bench_replay.py` measures the
proxy's TTFT overhead against direct requests.

    with ProxyServer(upstream_url, out_dir, "127.0.0.1", 0) as proxy:   # port 0: a free port
        ... send requests to proxy.url ...
    # here every recorded request is in out_dir/trace.jsonl
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import aiohttp
import uvicorn

from workbench.errors import WorkbenchError
from workbench.replay.recorder import CaptureSettings, Recorder
from workbench.serving.load.trace import Endpoint

# Hop-by-hop headers (RFC 9110 §7.6.1) belong to one connection; the rest travel both ways untouched.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
NOT_ADDED = ("Accept-Encoding", "User-Agent", "Content-Type")  # aiohttp adds these unless told not to


def _forward_headers(raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw if k.decode("latin-1").lower() not in HOP_BY_HOP]


def _response_headers(raw: Iterable[tuple[bytes, bytes]], length: int | None) -> list[tuple[bytes, bytes]]:
    kept = [(k.lower(), v) for k, v in raw if k.decode("latin-1").lower() not in HOP_BY_HOP]
    return kept + ([(b"content-length", str(length).encode())] if length is not None else [])


class CaptureApp:
    """The ASGI application (see the module docstring); `recorder` writes what it records."""

    def __init__(self, upstream: str, recorder: Recorder):
        self.upstream = upstream.rstrip("/")
        self.recorder = recorder
        self.client: aiohttp.ClientSession | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._forward(scope, receive, send)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                connector = aiohttp.TCPConnector(limit=0)  # as many upstream connections as clients
                timeout = aiohttp.ClientTimeout(total=None, sock_connect=30.0)
                self.client = aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.recorder.drain()
                if self.client is not None:
                    await self.client.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _forward(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = await _read_body(receive)
        arrival = time.perf_counter()
        pending = self._begin(scope, body, arrival)
        target = self.upstream + scope.get("raw_path", scope["path"].encode()).decode("latin-1")
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        assert self.client is not None
        chunks: list[tuple[float, bytes]] = []
        try:
            async with self.client.request(
                scope["method"],
                target,
                data=body,
                headers=_forward_headers(scope["headers"]),
                skip_auto_headers=NOT_ADDED,
                allow_redirects=False,
            ) as response:
                status = response.status
                streamed = response.headers.get("content-type", "").startswith("text/event-stream")
                length = None if streamed else response.content_length
                await send(
                    {
                        "type": "http.response.start",
                        "status": status,
                        "headers": _response_headers(response.raw_headers, length),
                    }
                )
                async for chunk in response.content.iter_any():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    if pending is not None:
                        chunks.append((time.perf_counter(), chunk))
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            status, streamed = 502, False
            chunks = [(time.perf_counter(), json.dumps({"error": f"upstream {type(exc).__name__}: {exc}"}).encode())]
            await _send_error(send, chunks[0][1])
        if pending is not None:
            self.recorder.finish(pending, status, streamed, chunks, time.perf_counter())

    def _begin(self, scope: dict[str, Any], body: bytes, arrival: float):
        endpoint = Endpoint.of_path(scope["path"]) if scope["method"] == "POST" else None
        if endpoint is None:
            return None
        try:
            parsed = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None  # not a request the upstream can answer either; forwarded, not recorded
        return self.recorder.begin(endpoint, parsed, arrival) if isinstance(parsed, dict) else None


async def _read_body(receive: Any) -> bytes:
    parts = []
    while True:
        message = await receive()
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(parts)


async def _send_error(send: Any, body: bytes) -> None:
    """A 502 when the upstream cannot be reached (a response has not started: the connection failed first)."""
    with contextlib.suppress(Exception):  # the response may have started; then the client sees it cut off
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 502, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})


def proxy_config(app: CaptureApp, host: str, port: int) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        server_header=False,
        date_header=False,
        timeout_keep_alive=30,
    )


class ProxyServer:
    """The proxy in a background thread, for notebooks, tests and benchmarks (the verb runs it in the foreground)."""

    def __init__(
        self,
        upstream: str,
        out_dir: Path,
        host: str = "127.0.0.1",
        port: int = 0,
        settings: CaptureSettings | None = None,
    ):
        self.out_dir = Path(out_dir)
        self.recorder = Recorder(self.out_dir, upstream, settings or CaptureSettings())
        self.server = uvicorn.Server(proxy_config(CaptureApp(upstream, self.recorder), host, port))
        self.thread = threading.Thread(target=self.server.run, name="workbench-capture-proxy", daemon=True)
        self.host = host

    @property
    def url(self) -> str:
        sockets = [s for server in self.server.servers for s in server.sockets]
        return f"http://{self.host}:{sockets[0].getsockname()[1]}"

    def __enter__(self) -> ProxyServer:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise WorkbenchError(
                    f"the capture proxy did not start on {self.host} (port in use?); choose another --listen"
                )
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=self.recorder.settings.drain_s + 60)  # the lifespan's drain finishes the trace


__all__ = ["CaptureApp", "ProxyServer", "proxy_config"]
