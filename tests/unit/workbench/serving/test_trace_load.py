"""`bench` with a trace: its flags, the chat role chunk that is not a token, the guard over kept answers."""

from __future__ import annotations

from tests.conftest import REPO_ROOT
from workbench import cli
from workbench.serving.load.client import _StreamState
from workbench.serving.load.outputs import guard_streams, stream_text
from workbench.serving.load.workload import Prompt

TRACE = REPO_ROOT / "tests" / "fixtures" / "replay" / "smollm2_capture"


def test_bench_takes_a_trace_or_fixed_lengths_never_both(capsys):
    assert cli.main(["bench", "--url", "http://127.0.0.1:9", "--trace", str(TRACE), "--input-len", "8"]) == 2
    assert "--trace sets the lengths" in capsys.readouterr().err
    assert cli.main(["bench", "--url", "http://127.0.0.1:9", "--input-len", "8", "--num-prompts", "2"]) == 2
    assert "--input-len and --output-len" in capsys.readouterr().err


def test_a_chat_streams_role_chunk_is_not_the_first_token():
    state = _StreamState()
    state.on_event(b'{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null}]}', 1.0)
    assert state.first is None
    state.on_event(b'{"id":"c","choices":[{"index":0,"delta":{"content":"The"}}]}', 2.0)
    assert state.first == 2.0


def test_the_guard_reads_the_kept_answers_after_the_run():
    kept = {
        0: [
            b'{"id":"c","choices":[{"index":0,"text":"!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!","finish_reason":"length"}]}',
            b"[DONE]",
        ],
        1: [b'{"id":"c","choices":[{"index":0,"text":" fine words","finish_reason":"length"}]}', b"[DONE]"],
    }
    prompts = [Prompt("w w w", 3)]
    assert stream_text(kept[1]) == (" fine words", "length", 0)
    summary = guard_streams(kept, prompts)
    assert (summary.answers, summary.flagged, summary.by_issue) == (2, 1, {"repetition": 1})
