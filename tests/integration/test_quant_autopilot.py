"""The autopilot's served evaluator against the executor on the tiny model: the same tokens, the same numbers.

One plan server of its own (W4A16, vLLM's CPU WNA16 kernel on our pack-quantized layout) beside the
session's pooled tiny server (float): the served NLL of the float model matches the executor's, and the
served W4A16 rise matches the executor's fake-quant rise -- the packing, the scales and the scoring agree.
"""

from __future__ import annotations

import pytest

from ascend_backend.quantization.scheme import PlanScheme
from workbench.quantize.evaluators import ExecutorEvaluator, ServedEvaluator
from workbench.quantize.plan_model import PlanModel
from workbench.quantize.stats import nll_rise
from workbench.quantize.texts import Target, build_splits


@pytest.fixture(scope="module")
def tiny_model():
    from workbench.embedded_models.catalog import prepare

    source = prepare("tiny")
    return source, PlanModel(source, max_batch_tokens=1024)


def test_served_and_executor_score_the_same_tokens_alike(tiny_model, tiny_recipe, server_env, tmp_path):
    source, model = tiny_model
    texts = build_splits(source, ("text",), limit=8, target=Target.FLOAT_GREEDY, max_tokens=96, model=model).dev
    served = ServedEvaluator(tiny_recipe, source, model.units, tmp_path, progress=False, extra_env=server_env)
    executor = ExecutorEvaluator(model)
    everything = {u.name: PlanScheme.FLOAT for u in model.units}
    (served_float,) = served.losses(everything, texts)
    (executor_float,) = executor.losses(everything, texts)
    assert set(served_float) == set(executor_float) == {t.id for t in texts}
    for text_id, nll in executor_float.items():
        assert served_float[text_id] == pytest.approx(nll, rel=2e-3, abs=2e-3), text_id  # float32 on both sides
    w4a16 = {u.name: PlanScheme.W4A16 for u in model.units}
    (served_w4,) = served.losses(w4a16, texts)
    (executor_w4,) = executor.losses(w4a16, texts)
    served_rise, executor_rise = nll_rise(served_w4, served_float), nll_rise(executor_w4, executor_float)
    assert served_rise.percent > 0.05  # 4-bit weights cost something, on both engines
    assert served_rise.percent == pytest.approx(executor_rise.percent, rel=0.1, abs=0.02)
