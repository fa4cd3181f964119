"""The autopilot on the tiny model in the executor: planted outliers found, the plan proven, resumable.

One planted checkpoint per session (three units with a 64x channel, float logits unchanged); the proxies,
the oracle and the search run on a handful of short texts, so the whole file takes seconds.
"""

from __future__ import annotations

import json

import pytest
import torch

from ascend_backend.models import Executor
from ascend_backend.quantization.scheme import PlanScheme
from workbench import cli
from workbench.errors import WorkbenchError
from workbench.quantize import planted, sensitivity
from workbench.quantize.autopilot import PLAN_FILE, AutoRequest, Outcome, run_autopilot
from workbench.quantize.plan_model import PlanModel
from workbench.quantize.texts import Target, calibration

PLANTED = ("model.layers.0.down", "model.layers.2.qkv", "model.layers.3.o")


@pytest.fixture(scope="module")
def planted_dir(tiny_cache, tmp_path_factory):
    out = tmp_path_factory.mktemp("planted")
    planted.write_planted(tiny_cache / "models" / "tiny", out, PLANTED, seed=1)
    return out


@pytest.fixture(scope="module")
def planted_model(planted_dir):
    model = PlanModel(planted_dir, max_batch_tokens=1024)
    model.calibrate(calibration(planted_dir, 6, max_tokens=96))
    return model


def test_planting_keeps_the_float_logits(tiny_dir, planted_dir):
    prompt = list(range(3, 40))
    before = Executor.from_pretrained(tiny_dir, num_blocks=8).prompt_logits(prompt)
    after = Executor.from_pretrained(planted_dir, num_blocks=8).prompt_logits(prompt)
    assert (before - after).abs().max() <= 1e-4
    channels = json.loads((planted_dir / "planted.json").read_text())["channels"]
    assert sorted(channels) == sorted(PLANTED)


def test_the_plan_model_scores_what_the_executor_computes(planted_dir, planted_model):
    """Its prefill is the executor's forward: the NLL of a text from prompt_logits, in float64."""
    from workbench.quantize.plan_model import ScoredText

    ids = tuple(range(5, 45))
    text = ScoredText("t", ids, 10)
    planted_model.apply({})
    (loss,) = planted_model.score([text])
    logits = Executor.from_pretrained(planted_dir, num_blocks=8).prompt_logits(list(ids)).double()
    logprobs = torch.log_softmax(logits, dim=-1)
    expected = -sum(float(logprobs[i - 1, ids[i]]) for i in range(10, len(ids)))
    assert loss.n_tokens == 30 and loss.nll_sum == pytest.approx(expected, rel=1e-5)


def test_the_proxies_rank_the_planted_units_first(planted_dir, planted_model):
    texts = calibration(planted_dir, 6, max_tokens=96)
    table = sensitivity.input_statistics(planted_model, texts, PlanScheme.W8A8, progress=False)
    table["logit_kl"] = table["unit"].map(sensitivity.logit_kl(planted_model, texts, PlanScheme.W8A8, progress=False))
    for proxy in ("range_span", "kurtosis", "output_mse", "logit_kl"):
        top = table.sort_values(proxy, ascending=False)["unit"].head(3)
        assert set(top) == set(PLANTED), proxy
    oracle = sensitivity.oracle(planted_model, texts, PlanScheme.W8A8, progress=False)
    table["oracle"] = table["unit"].map(oracle)
    agreement = sensitivity.agreement(table, ks=(3,))
    assert set(agreement["proxy"]) == set(sensitivity.PROXIES)
    assert agreement["spearman"].between(-1, 1).all() and agreement["precision@3"].between(0, 1).all()


def test_autopilot_finds_the_planted_units_and_proves_them_on_the_test_split(planted_dir, tmp_path):
    request = AutoRequest(
        str(planted_dir),
        budget=0.5,
        evaluator="executor",
        proxy="kurtosis",
        datasets=("text",),
        limit=8,
        target=Target.FLOAT_GREEDY,
        calibration_samples=4,
        max_tokens=96,
        ladder=(PlanScheme.W8A8, PlanScheme.FLOAT),
        state_dir=tmp_path / "state",
        out=tmp_path / "ckpt",
    )
    result = run_autopilot(request, progress=False)
    assert result.outcome is Outcome.HOLDS, result.text()
    kept = {u for u, s in result.units.items() if s == "FLOAT"}
    assert kept == set(PLANTED)
    assert result.test.high <= 0.5 and result.noise.high == 0.0  # the executor is deterministic
    assert result.measured == "executor"
    assert result.evaluations <= 1 + 2 + 2 + 3  # noise, verdict, both ends of [0, cap 8], log2(8) halvings
    plan = json.loads((tmp_path / "state" / PLAN_FILE).read_text())
    assert plan["float_modules"] == result.float_modules and "model.layers.0.mlp.down_proj" in plan["float_modules"]
    assert (tmp_path / "ckpt" / "config.json").is_file()
    # a rerun resumes: every evaluation comes from the state directory's cache
    again = run_autopilot(request, progress=False)
    assert again.units == result.units and all(step.cached for step in again.steps)


def test_an_impossible_float_cap_is_infeasible_with_the_best_plan(planted_dir, tmp_path):
    request = AutoRequest(
        str(planted_dir),
        budget=0.5,
        evaluator="executor",
        proxy="kurtosis",
        datasets=("text",),
        limit=8,
        target=Target.FLOAT_GREEDY,
        calibration_samples=4,
        max_tokens=96,
        max_float=1,
        ladder=(PlanScheme.W8A8, PlanScheme.FLOAT),
        state_dir=tmp_path,
    )
    result = run_autopilot(request, progress=False)
    assert result.outcome is Outcome.INFEASIBLE
    assert sum(s == "FLOAT" for s in result.units.values()) == 1  # the best within the cap, not all float
    assert "best measured" in result.message


def test_the_verb_prints_the_plan_as_json(planted_dir, tmp_path, capsys):
    code = cli.main(
        [
            "quantize",
            "--model",
            str(planted_dir),
            "--auto",
            "--budget",
            "0.5",
            "--evaluator",
            "executor",
            "--proxy",
            "kurtosis",
            "--dataset",
            "text",
            "--limit",
            "8",
            "--target",
            "float-greedy",
            "--num-samples",
            "4",
            "--ladder",
            "w8a8-static,float",
            "--state-dir",
            str(tmp_path),
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["outcome"] == "holds"
    assert set(out["float_modules"]) >= {"model.layers.0.mlp.down_proj", "model.layers.3.self_attn.o_proj"}
    assert set(out["modules"].values()) <= {"W8A8", "W8A8_DYNAMIC", "FLOAT"}


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--auto", "--budget", "0"], "--budget 0.0: give a positive percent"),
        (["--auto", "--ladder", "W8A8,W9"], "--ladder 'W8A8,W9': unknown scheme 'W9'"),
        (["--auto", "--ladder", "FLOAT,W8A8"], "end with FLOAT"),
        (["--auto", "--scheme", "w8a8-static"], "--auto chooses the schemes"),
        ([], "quantize needs --scheme, --format, --out"),
    ],
)
def test_bad_autopilot_flags_are_one_clear_error(tiny_dir, argv, message, capsys):
    assert cli.main(["quantize", "--model", "tiny", "--evaluator", "executor", *argv]) != 0
    assert message in capsys.readouterr().err


def test_a_served_plan_needs_a_recipe_for_a_directory(planted_dir, tmp_path):
    with pytest.raises(WorkbenchError, match="give --recipe"):
        run_autopilot(
            AutoRequest(
                str(planted_dir), datasets=("text",), limit=4, calibration_samples=2, max_tokens=64, state_dir=tmp_path
            ),
            progress=False,
        )


def test_an_engine_noisier_than_the_budget_allows_is_refused(planted_dir, tmp_path, monkeypatch):
    """The second float pass differs by ~2%: a 0.5% budget cannot be resolved, so no search is run."""
    from workbench.quantize.evaluators import ExecutorEvaluator

    exact = ExecutorEvaluator.losses

    def noisy(self, plan, texts, repeats=1):
        runs = exact(self, plan, texts, repeats)
        return [runs[0]] + [{k: v * (1.02 + 0.01 * (i % 3)) for i, (k, v) in enumerate(r.items())} for r in runs[1:]]

    monkeypatch.setattr(ExecutorEvaluator, "losses", noisy)
    request = AutoRequest(
        str(planted_dir),
        budget=0.5,
        evaluator="executor",
        proxy="kurtosis",
        datasets=("text",),
        limit=8,
        target=Target.FLOAT_GREEDY,
        calibration_samples=4,
        max_tokens=96,
        state_dir=tmp_path,
    )
    result = run_autopilot(request, progress=False)
    assert result.outcome is Outcome.REFUSED and result.steps == () and result.units == {}
    assert "raise --budget or --limit" in result.message and result.noise.low > 1.5


def test_the_verb_names_the_default_proxy_the_autopilot_uses(capsys):
    """The help text is written out (building the parser must not import torch); it must not drift from the code."""
    with pytest.raises(SystemExit):
        cli.main(["quantize", "--help"])
    assert f"default: {sensitivity.DEFAULT_PROXY}," in " ".join(capsys.readouterr().out.split())
