"""Graph mode and model facts read from a vLLM engine's config object (duck-typed, as the plugin hands it over).

The config objects here mirror the attributes vLLM and vllm-ascend set: compilation_config.cudagraph_mode
(an enum whose .name is the mode; vLLM 0.10.1+), compilation_config.level + full_cuda_graph (older
vllm-ascend, v0.9.x-v0.10.0rc1), model_config.enforce_eager, and vllm-ascend's additional_config
(torchair_graph_config / xlite_graph_config / pa_shape_list, vllm_ascend/ascend_config.py).
"""

from __future__ import annotations

import enum
from types import SimpleNamespace

import pytest
from packaging.version import Version

from ascend_backend.platform import kernels
from ascend_backend.platform.kernels import ChipFamily, GraphMode, SelectionContext, facts_from_vllm_config, selection
from ascend_backend.platform.kernels import engine as engine_mod


class CUDAGraphMode(enum.Enum):  # vLLM's names (vllm/config/compilation.py); values do not matter here
    NONE = 0
    PIECEWISE = 1
    FULL = 2
    FULL_DECODE_ONLY = (2, 0)
    FULL_AND_PIECEWISE = (2, 1)


def config(*, mode=None, eager=False, additional=None, level=None, full=False, arch="Qwen2ForCausalLM"):
    compilation = SimpleNamespace(cudagraph_mode=mode)
    if level is not None:
        compilation = SimpleNamespace(level=level, full_cuda_graph=full)
    return SimpleNamespace(
        compilation_config=compilation,
        model_config=SimpleNamespace(enforce_eager=eager, architectures=[arch]),
        additional_config=additional or {},
    )


@pytest.mark.parametrize(
    ("cfg", "mode", "where"),
    [
        (config(mode=CUDAGraphMode.FULL_DECODE_ONLY), GraphMode.FULL_DECODE_ONLY, "cudagraph_mode=FULL_DECODE_ONLY"),
        (config(mode=CUDAGraphMode.PIECEWISE), GraphMode.PIECEWISE, "cudagraph_mode=PIECEWISE"),
        (config(mode=CUDAGraphMode.FULL, eager=True), GraphMode.NONE, "enforce_eager"),
        (config(level=3, full=True), GraphMode.FULL, "level=3, full_cuda_graph=True"),
        (config(level=0), GraphMode.NONE, "level=0"),
        (
            config(mode=CUDAGraphMode.PIECEWISE, additional={"torchair_graph_config": {"enabled": True}}),
            GraphMode.TORCHAIR,
            "torchair_graph_config.enabled",
        ),
        (
            config(mode=CUDAGraphMode.PIECEWISE, additional={"xlite_graph_config": {"enabled": True}}),
            GraphMode.XLITE,
            "xlite_graph_config.enabled",
        ),
    ],
)
def test_the_effective_mode_and_where_it_was_read(cfg, mode, where):
    facts = facts_from_vllm_config(cfg)
    assert facts.graph_mode is mode and where in facts.graph_basis
    assert facts.architecture == "Qwen2ForCausalLM"


def test_pa_shape_list_and_no_config():
    facts = facts_from_vllm_config(config(mode=CUDAGraphMode.FULL_DECODE_ONLY, additional={"pa_shape_list": [8, 16]}))
    assert facts.pa_shape_list == (8, 16)
    assert facts_from_vllm_config(None) is None


def test_the_active_context_takes_the_engines_mode_and_the_override_still_wins(monkeypatch):
    monkeypatch.setattr(selection, "facts_from_machine", lambda: kernels.StackFacts(vllm_ascend="0.18.0"))
    selection._context_for.cache_clear()
    monkeypatch.delenv(kernels.OVERRIDE_VAR, raising=False)
    engine_mod.set_provider(lambda: config(mode=CUDAGraphMode.FULL_DECODE_ONLY, additional={"pa_shape_list": [4]}))
    try:
        context = kernels.active_context()
        assert context.graph_mode is GraphMode.FULL_DECODE_ONLY and "vLLM engine" in context.graph_basis
        assert context.pa_shape_list == (4,) and context.architecture == "Qwen2ForCausalLM"
        # decode of a batch in pa_shape_list runs _npu_paged_attention (attention/utils.py@v0.13.0)
        call = kernels.CallFacts(head_size=128, num_tokens=4)
        assert kernels.select("paged_decode_attention", context, call).kernel == "_npu_paged_attention"
        monkeypatch.setenv(kernels.OVERRIDE_VAR, "graph=NONE")
        assert kernels.active_context().graph_mode is GraphMode.NONE
    finally:
        engine_mod.set_provider(None)
        selection._context_for.cache_clear()


def test_a_provider_that_raises_means_no_engine():
    def outside_the_engine():
        raise AssertionError("Current vLLM config is not set")

    engine_mod.set_provider(outside_the_engine)
    try:
        assert engine_mod.engine_facts() is None
    finally:
        engine_mod.set_provider(None)


def test_describe_says_where_the_mode_came_from():
    context = SelectionContext(Version("0.18.0"), "t", (), ChipFamily.A2, "A2", None, GraphMode.NONE)
    assert "no engine config read" in context.describe()
