"""Twin runs on real vLLM CPU servers of the tiny model, kept small: few prompts, few tokens.

- batch 1 against batch 16 on the session's pooled tiny server (no server of its own): a per-prompt table
  and a verdict, the two batch compositions as sent;
- an injected fault in one op of one layer on side B (the registry's fault injection inside the plugin,
  `module=` naming vLLM's module): found as the first diverging token, then, through the CLI's module stage,
  as exactly that module and its op, with a single-op repro exported.
- a performance twin through the CLI (`twin --perf`): cpu-tiny against cpu-tiny with one op slowed in the
  registry (a planted `delay` fault): B is slower on TPOT, the kernel bucket holds the difference and the
  kernel table names the planted op. Its two profiler-configured servers are the tests' only new starts here;
  the A/A study and the other planted pairs are benchmarks/bench_perf_twin.py's.
TP=1 against TP=2 with the gathered module compare runs in notebook 11 (checked from its files in
tests/notebooks/test_notebook_results.py); eager against graph mode and the 32 x 64 measurement are in
benchmarks/bench_twin.py.
"""

from __future__ import annotations

import json

import pytest

from workbench import cli
from workbench.recipes import load_serving_recipe
from workbench.twin.api import Side, TwinRequest, TwinSettings, run_twin

pytestmark = pytest.mark.integration

FAULT_MODULE = "model.layers.2.post_attention_layernorm"
FAULT = f"add_rms_norm:scale:factor=1.2:module={FAULT_MODULE}"


@pytest.fixture
def runs_here(monkeypatch, log_dir):
    monkeypatch.setenv("ASCEND_WORKBENCH_RUNS", str(log_dir.parent / "runs"))  # server logs stay out of the checkout


def test_batch_of_one_against_a_batch_of_sixteen_on_one_pooled_server(tiny_server, server_env, tmp_path, runs_here):
    recipe = load_serving_recipe("cpu-tiny")
    a, b = Side.of_recipe("A", recipe, batch=1), Side.of_recipe("B", recipe, batch=16)
    request = TwinRequest(
        a,
        b,
        "text",
        out=tmp_path / "batch",
        num_prompts=16,
        settings=TwinSettings(max_tokens=8),
        locate=False,  # a near tie between batch compositions must not start the module stage's two dump servers
        extra_env=tuple(server_env.items()),
    )
    result = run_twin(request, progress=False)
    table = result.prompt_table()
    assert len(table) == 16 and set(table["outcome"]) <= {"identical", "near tie", "diverged"}
    assert result.verdict.verdict.value in ("pass", "warning", "error") and result.verdict.reasons
    assert result.noise is not None and result.noise.failed == 0
    logs = {
        side: [json.loads(line) for line in (tmp_path / "batch" / f"{side}.jsonl").read_text().splitlines()]
        for side in ("A", "B")
    }
    assert sorted(g["group"] for g in logs["A"]) == list(range(16))  # one prompt per request
    assert {g["group"] for g in logs["B"]} == {0}  # all sixteen in one request
    assert all(len(g["token_ids"]) == 8 and len(g["top"][0]) >= 1 for g in logs["A"] + logs["B"])
    record = result.reproducibility["sides"]["B"]
    assert (record["batch"], record["max_num_seqs"], record["request_seed"]) == (16, 32, 0)


def test_a_fault_in_one_layer_is_found_as_a_token_then_as_its_module(server_env, tmp_path, runs_here, capsys):
    out = tmp_path / "fault"
    code = cli.main(
        [
            "twin",
            "--recipe",
            "cpu-tiny",
            "--set",
            f"B:env.ASCEND_BACKEND_FAULT={FAULT}",
            "--num-prompts",
            "4",
            "--max-tokens",
            "6",
            "--noise-repeats",
            "0",
            "--out",
            str(out),
            "--no-progress",
            *[f"--env={k}={v}" for k, v in server_env.items()],
        ]
    )
    printed = capsys.readouterr().out
    assert code == 1, printed  # the fault makes real divergences: an error verdict
    saved = json.loads((out / "twin.json").read_text())
    diverged = [p for p in saved["prompts"] if p["outcome"] == "diverged"]
    assert diverged and all(p["gap"] > saved["summary"]["tie_tolerance"] for p in diverged)
    located = saved["locate"]
    assert located["first_module"] == FAULT_MODULE and located["ops"] == ["add_rms_norm"]
    assert located["first_step"] == 0 and located["errors"] > 0
    assert f"first diverging module: {FAULT_MODULE}" in printed
    repro = located["repro"]
    assert repro is not None and repro.endswith(".py") and (out / "locate").is_dir()
    compare = json.loads(next((out / "locate").glob("*/compare.json")).read_text())
    prefill = [r for r in compare["rows"] if r["step"] == 0]  # execution order
    first_error = next(i for i, r in enumerate(prefill) if r["verdict"] == "error")
    assert all(r["verdict"] == "pass" for r in prefill[:first_error])  # layers 0-1 and layer 2's attention agree
    assert prefill[first_error]["module"] == FAULT_MODULE and first_error > 20


def test_a_slowed_op_is_found_as_a_new_kernel_of_its_module_by_the_performance_twin(
    server_env, tmp_path, runs_here, capsys
):
    """How much of ΔTPOT lands in the kernel bucket depends on the machine's noise (the benchmark measures it on
    planted pairs and A/A runs); what must hold on any machine: the windows alternate and are saved, the buckets
    add up to the client's difference, and the planted wait is found as a new kernel of the op's module."""
    out = tmp_path / "perf"
    argv = ["twin", "--perf", "--recipe", "cpu-tiny", "--set", "B:env.ASCEND_BACKEND_FAULT=silu_and_mul:delay:ms=3"]
    argv += ["--input-len", "32", "96", "--output-len", "24", "--num-prompts", "8", "--concurrency", "4"]
    argv += ["--repeats", "1", "--warmup", "4", "--profile-delay", "2", "--profile-steps", "24", "--out", str(out)]
    code = cli.main([*argv, "--no-progress", *[f"--env={k}={v}" for k, v in server_env.items()]])
    printed = capsys.readouterr().out
    assert code == 0, printed
    saved = json.loads((out / "perf-twin.json").read_text())
    assert saved["kind"] == "perf-twin" and [w["window"] for w in saved["windows"]] == ["A0", "A1", "B0", "B1"]
    assert len((out / "windows.jsonl").read_text().splitlines()) == 4
    windows = {w["window"]: w for w in saved["windows"]}
    for metric in ("TPOT", "TTFT"):  # the buckets add up to what the client saw (TPOT: its typical step)
        buckets = sum(r["delta_ms"] for r in saved["buckets"] if r["metric"] == metric)
        assert buckets == pytest.approx(saved["totals"][metric]["delta_ms"], rel=1e-6, abs=1e-6)
    client_ttft = sum(windows[f"B{i}"]["ttft_ms"] - windows[f"A{i}"]["ttft_ms"] for i in (0, 1)) / 2
    assert saved["totals"]["TTFT"]["delta_ms"] == pytest.approx(client_ttft, rel=1e-6, abs=1e-6)
    top = saved["kernels"][0]
    assert (top["kernel"], top["status"], top["op"], top["module"]) == (
        "planted::silu_and_mul",
        "new",
        "silu_and_mul",
        "mlp.act_fn",
    )
    assert top["b_us_per_call"] >= 3000 and top["b_calls_per_step"] == pytest.approx(4, abs=0.5)  # 4 layers
    assert set(saved["idle"]) == {"A", "B"} and saved["idle"]["B"]
    assert saved["profiler_cost"]["A"] is not None and "performance twin" in printed
    assert list((out / "windows" / "B1" / "traces").glob("*.pt.trace.json.gz"))
