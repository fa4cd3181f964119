"""ascend_backend's vLLM plugin inside real vLLM CPU engines on SmolLM2-135M.

Four eager engines, two at a time (the whole module shares them), and two compiled ones for the tests
marked `long` (torch.compile of SmolLM2 on 2 cores: `make test-long`, not in `make test`):
  eager-off / compiled-off   VLLM_PLUGINS=""  (vLLM alone; also proves the allow-list switches us off)
  eager-on  / compiled-on    the plugin as deployed, loaded through its entry point in every vLLM
                             process: the registry runs vLLM's C++ kernels (backend `vllm_cpu`) for the
                             cache write, attention and RoPE, and our native code for the other ops
  eager-native               the plugin with ASCEND_BACKEND_FORCE_NATIVE=all: our native PyTorch kernels
                             for every op, with the fused (Inductor) decode kernel forced for every decode
  fault                      eager, ASCEND_BACKEND_FAULT=rms_norm:nan:call=6 and
                             ASCEND_BACKEND_DISABLED_OPS=silu_and_mul
Greedy outputs with the plugin must be token-identical to vLLM alone; the stats files must show calls
of every overridden op and of attention, on the backend each run chose; the fault must break the output
and be counted once.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.integration.plugin_support import MAX_TOKENS, PROMPTS, RunResult, RunSpec, run_engine

pytestmark = pytest.mark.integration

ROUTED_OPS = (
    "rms_norm",
    "add_rms_norm",
    "silu_and_mul",
    "rotary_embedding",
    "vllm_cpu_kv_write",
    "vllm_cpu_paged_attention",
)
VLLM_KERNEL_OPS = ("rms_norm", "add_rms_norm", "rotary_embedding", "vllm_cpu_kv_write", "vllm_cpu_paged_attention")
FAULT_CALL = 6  # past the warm-up forward(s): lands in a real generation step


@pytest.fixture(scope="module")
def smollm2() -> Path:
    from workbench.embedded_models import api as embedded_models

    return embedded_models.prepare("smollm2")


@pytest.fixture(scope="module")
def runs(smollm2: Path, server_env: dict[str, str], tmp_path_factory) -> dict[str, RunResult]:
    workdir = tmp_path_factory.mktemp("plugin-runs")
    specs = [
        RunSpec("eager-off", smollm2, compiled=False, plugin=False, workdir=workdir, extra_env=server_env),
        RunSpec("eager-on", smollm2, compiled=False, plugin=True, workdir=workdir, extra_env=server_env),
        RunSpec(
            "eager-native",
            smollm2,
            compiled=False,
            plugin=True,
            workdir=workdir,
            extra_env={
                **server_env,
                "ASCEND_BACKEND_FORCE_NATIVE": "all",
                "ASCEND_BACKEND_FUSED_DECODE": "on",
                "ASCEND_BACKEND_LOG_LEVEL": "INFO",
            },
        ),
        RunSpec(
            "fault",
            smollm2,
            compiled=False,
            plugin=True,
            workdir=workdir,
            extra_env={
                **server_env,
                "ASCEND_BACKEND_FAULT": f"rms_norm:nan:call={FAULT_CALL}",
                "ASCEND_BACKEND_DISABLED_OPS": "silu_and_mul",
            },
        ),
    ]
    return run_pairs(specs)


@pytest.fixture(scope="module")
def compiled_runs(smollm2: Path, server_env: dict[str, str], tmp_path_factory) -> dict[str, RunResult]:
    workdir = tmp_path_factory.mktemp("plugin-compiled-runs")
    return run_pairs(
        [
            RunSpec("compiled-off", smollm2, compiled=True, plugin=False, workdir=workdir, extra_env=server_env),
            RunSpec("compiled-on", smollm2, compiled=True, plugin=True, workdir=workdir, extra_env=server_env),
        ]
    )


def run_pairs(specs: list[RunSpec]) -> dict[str, RunResult]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(run_engine, specs))
    return {r.spec.name: r for r in results}


def assert_same_tokens(with_plugin: RunResult, without: RunResult) -> None:
    assert len(with_plugin.tokens) == len(PROMPTS)
    for prompt, got, want in zip(PROMPTS, with_plugin.tokens, without.tokens, strict=True):
        assert len(want) == MAX_TOKENS
        differ = [i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b]
        assert not differ, f"{prompt!r}: tokens differ from position {differ[:1]}: {got} vs {want}"


@pytest.mark.parametrize("name", ["eager-on", "eager-native"])
def test_eager_outputs_are_token_identical_to_vllm_alone(runs, name):
    assert_same_tokens(runs[name], runs["eager-off"])


def test_the_fused_decode_kernel_served_the_native_engine(runs):
    log = runs["eager-native"].log.read_text(errors="replace")
    assert "fused paged decode kernel ready" in log
    assert "fused paged decode unavailable" not in log


@pytest.mark.long
def test_compiled_outputs_are_token_identical_to_vllm_alone(compiled_runs):
    assert_same_tokens(compiled_runs["compiled-on"], compiled_runs["compiled-off"])


@pytest.mark.long
def test_every_routed_op_and_attention_is_called_inside_the_compiled_engine(compiled_runs):
    assert_routed(compiled_runs["compiled-on"].stats, "compiled-on")


@pytest.mark.parametrize("name", ["eager-on", "eager-native"])
def test_every_routed_op_and_attention_is_called_inside_the_engine(runs, name):
    assert_routed(runs[name].stats, name)


def assert_routed(stats, name: str) -> None:
    assert len(stats.processes) >= 2  # the front-end process and at least the worker each wrote a file
    for op in ROUTED_OPS:
        assert stats.calls(op) > 0, f"{op} never called in {name}: {stats.totals}"
        # Every call on the backend this run chose: vLLM's kernels where the plugin registered them,
        # unless ASCEND_BACKEND_FORCE_NATIVE=all; native for the rest.
        backend = "vllm_cpu" if op in VLLM_KERNEL_OPS and name != "eager-native" else "native"
        assert stats.totals[op] == {backend: stats.calls(op)}, f"{op} in {name}: {stats.totals[op]}"
    # one attention call per layer per step: SmolLM2 has 30 layers, and at least MAX_TOKENS steps ran
    assert stats.calls("vllm_cpu_paged_attention") >= 30 * MAX_TOKENS
    assert stats.calls("vllm_cpu_paged_attention") % 30 == 0


def test_vllm_plugins_allow_list_switches_the_plugin_off(runs):
    assert runs["eager-off"].stats.processes == ()  # no process loaded the plugin, so none wrote stats


def test_nan_fault_in_one_rms_norm_call_breaks_the_output_and_is_counted(runs):
    fault, clean = runs["fault"], runs["eager-on"]  # same kernels, no fault
    assert fault.stats.faulted("rms_norm") == 1  # exactly the one call named in ASCEND_BACKEND_FAULT
    assert fault.stats.calls("rms_norm") > FAULT_CALL
    assert fault.tokens != clean.tokens or fault.has_nan_logprob()
    assert fault.stats.calls("silu_and_mul") == 0  # ASCEND_BACKEND_DISABLED_OPS kept vLLM's SiluAndMul
    assert fault.stats.calls("add_rms_norm") > 0
