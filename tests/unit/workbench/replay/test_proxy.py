"""The capture proxy: clients get the upstream's bytes untouched; chat and completions requests are recorded."""

from __future__ import annotations

import json

import httpx

from workbench.replay.capture import CaptureRequest, capture_proxy, read_capture
from workbench.replay.recorder import CaptureSettings
from workbench.serving.load.trace import LogprobsSource, read_trace

NO_SHADOW = CaptureSettings(top_logprobs=0, score_sampled=False)
CHAT = {
    "model": "m",
    "messages": [{"role": "user", "content": "Capital of France?"}],
    "max_tokens": 8,
    "temperature": 0,
}


def _compare(client: httpx.Client, direct_url: str, proxy_url: str, method: str, path: str, **kwargs):
    direct = client.request(method, direct_url + path, **kwargs)
    proxied = client.request(method, proxy_url + path, **kwargs)
    assert proxied.status_code == direct.status_code
    assert proxied.content == direct.content
    drop = {"date"}  # the upstream stamps each answer with the second it was sent
    assert {k: v for k, v in proxied.headers.items() if k not in drop} == {
        k: v for k, v in direct.headers.items() if k not in drop
    }
    return proxied


def test_clients_receive_exactly_the_upstreams_bytes_streamed_or_whole(upstream, tmp_path):
    fake, url = upstream
    with (
        capture_proxy(CaptureRequest(url, tmp_path / "t", port=0, settings=NO_SHADOW)) as proxy,
        httpx.Client() as client,
    ):
        _compare(client, url, proxy.url, "POST", "/v1/chat/completions", json=CHAT)
        streamed = _compare(client, url, proxy.url, "POST", "/v1/chat/completions", json=CHAT | {"stream": True})
        assert streamed.headers["content-type"].startswith("text/event-stream") and b"data: [DONE]" in streamed.content
        _compare(client, url, proxy.url, "POST", "/v1/completions", json={"model": "m", "prompt": "x", "stream": True})
        gz = _compare(client, url, proxy.url, "GET", "/gz", headers={"Accept-Encoding": "gzip"})
        assert gz.headers["content-encoding"] == "gzip" and gz.json() == {"ok": True}  # passed on still compressed
        _compare(client, url, proxy.url, "GET", "/v1/models?x=1")
    # what the upstream saw from the proxy is what the client sent: path, query, body, the client's headers
    direct, proxied = fake.seen[-2], fake.seen[-1]
    assert proxied[:3] == direct[:3] == ("GET", "/v1/models", b"x=1")
    hop_by_hop = ("host", "connection")  # one connection's own; every other header is relayed as sent
    sent = {k: v for k, v in fake.seen[0][3].items() if k not in hop_by_hop}
    relayed = {k: v for k, v in fake.seen[1][3].items() if k not in hop_by_hop}
    assert fake.seen[0][4] == fake.seen[1][4] and sent == relayed


def test_chat_and_completions_are_recorded_with_their_answers_the_rest_only_forwarded(upstream, tmp_path):
    _, url = upstream
    with (
        capture_proxy(CaptureRequest(url, tmp_path / "t", port=0, settings=NO_SHADOW)) as proxy,
        httpx.Client() as client,
    ):
        client.post(proxy.url + "/v1/chat/completions", json=CHAT | {"stream": True})
        client.post(proxy.url + "/v1/completions", json={"model": "m", "prompt": "The capital", "temperature": 0})
        client.get(proxy.url + "/v1/models")
    records = read_trace(tmp_path / "t")
    assert [r.endpoint.value for r in records] == ["chat", "completions"]
    chat = records[0]
    assert (
        chat.answer.choices[0].text == "The capital of France is Paris."
        and chat.answer.choices[0].finish_reason == "stop"
    )
    assert chat.answer.ttft_s is not None and chat.answer.e2e_s >= chat.answer.ttft_s >= 0
    assert records[1].answer.ttft_s is None and records[1].answer.usage["completion_tokens"] == 7
    assert chat.session is not None and records[1].session is None  # completions stand alone
    summary = read_capture(tmp_path / "t")
    assert summary["requests"] == 2 and summary["classes"] == {"chat": 1, "completion": 1}


def test_a_greedy_answer_gets_its_logprobs_from_a_shadow_request_the_client_never_sees(upstream, tmp_path):
    fake, url = upstream
    with capture_proxy(CaptureRequest(url, tmp_path / "t", port=0, settings=CaptureSettings(top_logprobs=2))) as proxy:
        with httpx.Client() as client:
            answer = client.post(proxy.url + "/v1/chat/completions", json=CHAT).json()
    assert answer["choices"][0]["logprobs"] is None  # the client asked for none and got none
    shadow = json.loads(fake.seen[-1][4])
    assert shadow["logprobs"] is True and shadow["top_logprobs"] == 2 and shadow["return_tokens_as_token_ids"] is True
    record = read_trace(tmp_path / "t")[0]
    assert record.answer.logprobs_source is LogprobsSource.SHADOW
    assert record.answer.choices[0].logprobs.tokens[0] == "token_id:100"
    assert read_capture(tmp_path / "t")["stats"]["shadow_mismatches"] == 0


def test_an_unreachable_upstream_is_a_502_for_the_client_and_a_recorded_error(tmp_path):
    with capture_proxy(CaptureRequest("http://127.0.0.1:9", tmp_path / "t", port=0, settings=NO_SHADOW)) as proxy:
        with httpx.Client() as client:
            response = client.post(proxy.url + "/v1/chat/completions", json=CHAT)
    assert response.status_code == 502 and "upstream" in response.json()["error"]
    record = read_trace(tmp_path / "t")[0]
    assert not record.answer.ok and record.answer.status == 502
