"""Shadow replay on real vLLM CPU servers.

Fast (`make test`), on the tiny model, sharing the session's pooled servers: the proxy passes a real server's
bytes through untouched; a short multi-turn trace captured through it replays identical on the same server,
resumes without resending, and against cpu-tiny-fault (one RMSNorm scaled by 3) comes back `different` where the fault bites, handed to a twin run that finds the first diverging token;
`bench --trace` sends the trace and prints the output guard's line; a real vLLM 0.32 request log imports and replays.

Long (`make test-long`): the acceptance experiment on SmolLM2 — a trace of more than 200 requests (conversations,
tool calls, JSON-schema requests, completions, sampled requests) captured through the proxy, replayed on the
same configuration (its noise) and on three planted differences, each named in the right class.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO_ROOT
from workbench import cli
from workbench.recipes import load_serving_recipe
from workbench.replay import api
from workbench.settings import run_dir
from workbench.twin.api import Side, TwinRequest, TwinSettings, run_twin

pytestmark = pytest.mark.integration
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "replay"
TINY_TRAFFIC = {
    "conversations": 3,
    "turns": 2,
    "single_repeats": 1,
    "singles": 2,
    "max_tokens": 16,
    "rate": 8.0,
    "kinds": ("json", "completion"),
    "sampled_every": 3,
}


@pytest.fixture
def runs_here(monkeypatch, log_dir):
    monkeypatch.setenv("ASCEND_WORKBENCH_RUNS", str(log_dir.parent / "runs"))


@pytest.fixture(scope="module")
def tiny_trace(tiny_server, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("replay") / "trace"
    with api.capture_proxy(api.CaptureRequest(tiny_server.url, out, port=0)) as proxy:
        sent = api.play_traffic(proxy.url, api.TrafficSpec(tiny_server.model, **TINY_TRAFFIC))
    assert sent == len(api.read_trace(out)) >= 8
    return out


def _masked(body: bytes) -> bytes:
    return re.sub(rb'"created":\d+', b'"created":0', body)


def _streamed(body: bytes) -> dict:
    """A stream's content whatever its chunking: vLLM merges the tokens ready at once into one chunk, so on a
    busy machine two generations of the same greedy answer arrive cut differently (measured in CI: the same
    bytes but for where one chunk ended). Per choice the text, the logprob entries and the finish reason."""
    merged: dict = {}
    for line in body.decode().splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            assert line in ("", "data: [DONE]"), line  # nothing but SSE data frames
            continue
        for choice in json.loads(line[6:])["choices"]:
            seen = merged.setdefault(choice["index"], {"text": "", "logprobs": [], "finish": None})
            seen["text"] += choice.get("text") or (choice.get("delta") or {}).get("content") or ""
            seen["logprobs"] += ((choice.get("logprobs") or {}).get("content")) or []
            seen["finish"] = choice.get("finish_reason") or seen["finish"]
    return merged


def test_the_proxy_passes_a_real_servers_bytes_through_untouched(tiny_server, tmp_path):
    bodies = [
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "Hello there"}], "max_tokens": 6, "temperature": 0},
        ),
        (
            "/v1/chat/completions",
            {
                "messages": [{"role": "user", "content": "Hi"}],
                "max_tokens": 6,
                "temperature": 0,
                "stream": True,
                "logprobs": True,
                "top_logprobs": 2,
            },
        ),
        ("/v1/completions", {"prompt": "The sea", "max_tokens": 6, "temperature": 0, "stream": True}),
        # two choices whole: streamed, vLLM interleaves their chunks in whichever order they finish
        ("/v1/completions", {"prompt": "The sea", "max_tokens": 6, "temperature": 0.8, "seed": 7, "n": 2}),
    ]
    quiet = api.CaptureSettings(top_logprobs=0, score_sampled=False)  # no shadow request beside the compared ones
    with (
        api.capture_proxy(api.CaptureRequest(tiny_server.url, tmp_path / "t", port=0, settings=quiet)) as proxy,
        httpx.Client(timeout=60) as client,
    ):
        for number, (path, body) in enumerate(bodies):
            body = body | {"model": tiny_server.model}
            headers = {"X-Request-Id": f"bytes-{number}"}  # vLLM derives the answer's id from it
            direct = client.post(tiny_server.url + path, json=body, headers=headers)
            proxied = client.post(proxy.url + path, json=body, headers=headers)
            assert proxied.status_code == direct.status_code == 200
            if body.get("stream"):
                assert _streamed(proxied.content) == _streamed(direct.content)
            else:
                assert _masked(proxied.content) == _masked(direct.content)  # the second-resolution `created` aside
            assert {k: v for k, v in proxied.headers.items() if k != "date"} == {
                k: v for k, v in direct.headers.items() if k != "date"
            }
        listed = [client.get(u + "/v1/models").json()["data"] for u in (proxy.url, tiny_server.url)]
        assert [m["id"] for m in listed[0]] == [m["id"] for m in listed[1]]  # forwarded, not recorded
    records = api.read_trace(tmp_path / "t")
    assert [r.endpoint.value for r in records] == ["chat", "chat", "completions", "completions"]
    assert len(records[3].answer.choices) == 2 and records[1].answer.logprobs_source.value == "client"


def test_a_captured_trace_replays_identical_on_its_own_server_and_resumes(tiny_server, tiny_trace, tmp_path):
    records = api.read_trace(tiny_trace)
    assert any(r.turn == 1 and r.after_parent for r in records) and {r.request_class for r in records} >= {
        "chat",
        "followup",
        "json",
        "completion",
    }
    request = api.ReplayRequest(tiny_trace, url=tiny_server.url, out=tmp_path / "same", progress=False)
    result = api.run_replay(request)
    counts = result.counts()
    alike = counts[api.Parity.IDENTICAL] + counts[api.Parity.NEAR_TIE]
    assert alike == len(records), result.text()
    assert result.fidelity is not None and result.fidelity.requests == len(records)
    sent = (tmp_path / "same" / "requests.jsonl").read_text().count("\n")
    again = api.run_replay(request)  # resumes: every answer is there, nothing is sent again
    assert (tmp_path / "same" / "requests.jsonl").read_text().count("\n") == sent == len(records)
    assert again.counts() == counts


def test_a_planted_fault_comes_back_different_and_is_handed_to_twin(
    tiny_trace, server_env, tmp_path, runs_here, capsys
):
    out = tmp_path / "fault"
    code = cli.main(
        [
            "replay",
            str(tiny_trace),
            "--recipe",
            "cpu-tiny-fault",
            "--out",
            str(out),
            "--no-progress",
            "--to-twin",
            "cpu-tiny",
            *[f"--env={k}={v}" for k, v in server_env.items()],
        ]
    )
    printed = capsys.readouterr().out
    saved = api.read_replay(out)
    different = [r for r in saved["requests"] if r["parity"] == "different"]
    assert different and code in (0, 1), printed
    assert "twin --recipe cpu-tiny --recipe cpu-tiny-fault" in printed and (out / "twin_prompts.jsonl").is_file()
    first = min(different, key=lambda r: r["position"] if r["position"] is not None else 99)
    a = Side("A", recipe=load_serving_recipe("cpu-tiny"))
    b = Side("B", recipe=load_serving_recipe("cpu-tiny-fault"))
    request = TwinRequest(
        a,
        b,
        out / "twin_prompts.jsonl",
        out=tmp_path / "twin",
        num_prompts=1,
        settings=TwinSettings(max_tokens=max(first["position"] or 0, 0) + 4, noise_repeats=0),
        locate=False,
        extra_env=tuple(server_env.items()),
    )
    twin = run_twin(request, progress=False)
    assert twin.first_divergence(near_ties=True) is not None, twin.text()


def test_bench_sends_a_trace_and_reports_the_output_guard(tiny_server, tiny_trace, capsys):
    code = cli.main(["bench", "--url", tiny_server.url, "--trace", str(tiny_trace), "--speed", "4", "--no-progress"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "Load result (trace x4)" in printed and re.search(
        r"guard: (all \d+ answers look sane|\d+ of \d+ answers)", printed
    )


def test_a_real_vllm_request_log_imports_and_replays(tiny_server, tmp_path):
    imported = api.run_import_trace(
        api.ImportTraceRequest(api.TraceSource.VLLM_LOG, FIXTURES / "vllm032_debug_requests.log", tmp_path / "log")
    )
    assert imported.requests == 3 and imported.classes == {"chat": 2, "completion": 1}
    request = api.ReplayRequest(tmp_path / "log", url=tiny_server.url, out=tmp_path / "r", speed=20.0, progress=False)
    result = api.run_replay(request)  # the log's requests came 9 and 34 s apart
    rows = {v.id: v for v in result.verdicts}
    assert len(rows) == 3 and rows["r000001"].recorded == "The capital of France is Paris."  # SmolLM2's logged answer
    assert rows["r000003"].parity in (api.Parity.NO_REFERENCE, api.Parity.BROKEN)  # its answer was not logged


# -- the acceptance experiment (long) ------------------------------------------------------------------------

PLANTED = {
    "cpu-smollm2-tools-fault": {"chat", "followup", "json", "tools", "completion"},
    "cpu-smollm2-tools-template": {"chat", "followup", "json"},
    "cpu-smollm2-tools-parser": {"tools"},
}


@pytest.mark.long
@pytest.mark.timeout(3600)  # capture and five replays of 200+ SmolLM2 requests: about half an hour on 2 cores
def test_two_hundred_smollm2_requests_replay_alike_on_themselves_and_name_each_planted_difference(server_env):
    plan = api.ExperimentPlan(
        reference=load_serving_recipe("cpu-smollm2-tools"),
        planted=tuple(load_serving_recipe(name) for name in PLANTED),
        out=run_dir("replay-acceptance", fresh=True),  # under runs/: kept for its figures, whatever prunes /tmp
        traffic={"conversations": 40, "turns": 3, "single_repeats": 2, "max_tokens": 24},
        extra_env=server_env,
    )
    report = api.run_experiment(plan)
    print(json.dumps(report.table(), indent=1))  # the figures (run with -s to see them)
    for name, result in {"noise": report.noise, "same": report.same, **report.planted}.items():
        print(f"--- {name}\n{result.text()}")
    records = api.read_trace(report.trace)
    assert len(records) >= 200 and {r.request_class for r in records} == {
        "chat",
        "followup",
        "tools",
        "json",
        "completion",
    }
    assert any(not r.greedy for r in records) and any(r.after_parent for r in records)
    same = report.same.counts()  # the reference replayed on itself, judged against its own measured noise
    alike = same[api.Parity.IDENTICAL] + same[api.Parity.NEAR_TIE]
    assert alike >= 0.99 * len(report.same.verdicts), report.same.text()
    for name, touched in PLANTED.items():
        result = report.planted[name]
        changed = {v.request_class for v in result.verdicts if v.parity in (api.Parity.DIFFERENT, api.Parity.BROKEN)}
        assert changed and changed <= touched, (name, changed, result.text())
    (plan.out / "table.json").write_text(json.dumps(report.table(), indent=1))
