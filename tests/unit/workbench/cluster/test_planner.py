"""The layout planner: vLLM's KV arithmetic, what DP replicates and EP splits, and refusals that name the knob."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FIXTURES
from workbench.cluster.api import PlanRequest, run_plan
from workbench.cluster.model_facts import facts_from_config
from workbench.cluster.plan import make_plan
from workbench.cluster.planner import GIB, Chips, Engine, Layout, load_figures, weights_per_rank
from workbench.errors import WorkbenchError

MODELS = FIXTURES / "cluster" / "models"


def facts(name: str):
    return facts_from_config(json.loads((MODELS / name / "config.json").read_text()), name)


@pytest.fixture(scope="module")
def figures():
    base = load_figures()
    # a 32 GiB vNPU, as in vllm-ascend #9372 (the shipped table holds real 64 GiB chips only)
    vnpu = base.chips["910B3"].model_copy(update={"memory_mb": 32768, "source": "vllm-ascend #9372 (32GB vNPU)"})
    return base.model_copy(update={"chips": {**base.chips, "vnpu32": vnpu}})


@pytest.mark.parametrize(("layout", "tokens"), [("tp=1", 262_144), ("tp=2", 524_288), ("dp=2", 262_144)])
def test_cpu_kv_tokens_follow_vllm_v1_sizing(tiny_dir, layout, tokens):
    # tiny: 4 layers, 2 KV heads of 64, float32: 2 x 2 x 64 x 4 x 4 = 4096 bytes a token; TP=2 holds one head a rank
    plan = run_plan(PlanRequest(str(tiny_dir), "2xcpu", layout, kv_cache_gib=1, dtype="float32"))
    assert plan.kv_tokens == tokens
    assert plan.bytes_per_token * plan.kv_tokens == GIB
    assert plan.fits


def test_block_rounding_floors_to_whole_blocks(tiny_dir):
    plan = run_plan(PlanRequest(str(tiny_dir), "1xcpu", kv_cache_gib=0.001, dtype="float32", block_size=32))
    assert plan.kv_tokens % 32 == 0 and plan.kv_tokens * plan.bytes_per_token <= 0.001 * GIB


def test_qwen3_14b_on_a_32_gib_vnpu_is_refused_naming_the_knob(figures):
    # vllm-ascend #9372: weights 27.54 GiB, "Available KV cache memory: -0.87 GiB" (the runtime figure is taken
    # from this case, so only the knob and the order of magnitude are asserted)
    plan = make_plan(
        facts("qwen3-14b"),
        Chips.parse("1xvnpu32", figures),
        Layout(),
        Engine(max_model_len=4096, enforce_eager=True),
        figures,
    )
    short = plan.budget_bytes - sum(v for k, v in plan.per_rank.items() if k != "kv_cache")
    assert short / GIB == pytest.approx(-0.87, abs=0.1)
    assert plan.refusal is not None and plan.refusal.knob == "--gpu-memory-utilization"
    assert plan.refusal.value.startswith("0.95")


def test_a_long_context_is_refused_naming_max_model_len(figures):
    plan = make_plan(
        facts("qwen3-14b"), Chips.parse("1x910B3", figures), Layout(), Engine(max_model_len=400_000), figures
    )
    assert plan.refusal is not None and plan.refusal.knob == "--max-model-len"
    assert plan.refusal.value.startswith(f"{plan.kv_tokens:,}")


def test_data_parallel_replicates_the_dense_part(figures):
    # vllm-ascend #11019: Kimi-K2 on 2 x 8 A2, TP=8+DP=2+EP runs out of memory where TP=16 loads: with EP the
    # experts split the same way, but DP ranks each hold the dense part split over 8 ranks instead of 16
    kimi, engine = facts("kimi-k2"), Engine(weight_bits=4)
    tp16 = weights_per_rank(kimi, Layout(tp=16), engine)
    dp2 = weights_per_rank(kimi, Layout(tp=8, dp=2, ep=True), engine)
    assert dp2["experts"] == tp16["experts"]
    dense = ("embedding", "lm_head", "attention", "mlp")
    assert sum(dp2[k] for k in dense) == pytest.approx(2 * sum(tp16[k] for k in dense), rel=1e-6)


def test_the_connector_takes_its_share_from_the_kv_cache(figures):
    # vllm-ascend #12839: 10 GB more at load with --kv-transfer-config (MooncakeConnector)
    kimi = facts("kimi-k2")
    chips, layout = Chips.parse("2x8x910B3", figures), Layout(tp=16)
    plain = make_plan(kimi, chips, layout, Engine(weight_bits=4), figures)
    pd = make_plan(kimi, chips, layout, Engine(weight_bits=4, connector="MooncakeConnector"), figures)
    assert plain.kv_bytes - pd.kv_bytes == 10 * GIB


def test_more_ranks_than_chips_names_the_flag(figures):
    with pytest.raises(WorkbenchError, match="needs 32 chips"):
        make_plan(facts("kimi-k2"), Chips.parse("2x8x910B3", figures), Layout(tp=16, dp=2), Engine(), figures)


@pytest.mark.parametrize(
    ("text", "match"),
    [("tp=8,ep=4", "expert parallelism spans"), ("tp8", "write tp=N"), ("tp=2,xx=1", "write tp=N")],
)
def test_bad_layouts(text, match):
    with pytest.raises(WorkbenchError, match=match):
        Layout.parse(text)


def test_bad_chips(figures):
    with pytest.raises(WorkbenchError, match="unknown chip"):
        Chips.parse("8x910X", figures)
    assert Chips.parse("2x8x910B3", figures).count == 16


def test_plan_result_is_a_typed_document(tmp_path, tiny_dir):
    from workbench.cluster.plan import PLAN_KIND

    out = tmp_path / "plan.json"
    run_plan(PlanRequest(str(tiny_dir), "1xcpu", kv_cache_gib=1, out=out))
    document = PLAN_KIND.read(out)
    assert document["kv_tokens_per_rank"] > 0 and document["fits"] is True
