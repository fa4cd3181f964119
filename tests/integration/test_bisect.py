"""Feature bisect against real vLLM CPU servers on the tiny model.

One bisect exercises both failure classes a feature shows once the server is up — an op fault that
crashes the engine, and an op fault that only changes the numbers — and is interrupted after its
baseline to prove it resumes. (A feature the server refuses at start-up, block size 16 on CPU, is
classified by the same crash classifier in test_server.py and recorded by a sweep in test_sweep.py.) The whole shipped CPU plan, where every
feature must pass, is a long experiment (about ten server starts): benchmarks/bench_feature_plan.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT
from workbench.bisect.plan import load_plan
from workbench.bisect.runner import Bisect, probe_with_server
from workbench.recipes import load_serving_recipe

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RECIPE = REPO_ROOT / "recipes/serving/cpu-tiny.yaml"

BROKEN_PLAN = {
    "name": "broken-features",
    "target": "cpu",
    "baseline": yaml.safe_load((REPO_ROOT / "recipes/features/cpu.yaml").read_text())["baseline"],
    "features": [
        {
            "name": "crashing_kernel",
            "description": "rms_norm raises inside the engine",
            "env": {"VLLM_PLUGINS": "ascend_backend", "ASCEND_BACKEND_FAULT": "rms_norm:raise"},
            "compilation": {"custom_ops": ["all"]},
        },
        {
            "name": "wrong_kernel",
            "description": "rms_norm output scaled by 1.5: runs, answers wrong",
            "env": {"VLLM_PLUGINS": "ascend_backend", "ASCEND_BACKEND_FAULT": "rms_norm:scale:factor=1.5"},
            "compilation": {"custom_ops": ["all"]},
        },
    ],
    "order": ["crashing_kernel", "wrong_kernel"],
    "compare": {"max_tokens": 8},
}


class Interrupted(Exception):
    pass


def test_culprits_are_named_with_their_class_and_an_interrupted_run_resumes(tmp_path):
    plan_path = tmp_path / "plan.yaml"
    plan_path.write_text(yaml.safe_dump(BROKEN_PLAN))
    plan, recipe, out = load_plan(plan_path), load_serving_recipe(RECIPE), tmp_path / "bisect"
    real_probe = probe_with_server(plan)
    probed: list[str] = []

    def counting_probe(*args):
        probed.append(args[3])
        return real_probe(*args)

    def stop_after_baseline(record):
        if record.kind == "baseline":
            raise Interrupted

    with pytest.raises(Interrupted):
        Bisect(recipe, plan, out, probe=counting_probe, on_step=stop_after_baseline).run(progress=False)
    assert probed == ["baseline"]

    verdict = Bisect(recipe, plan, out, probe=counting_probe).run(progress=False)
    assert probed == ["baseline", "crashing_kernel", "wrong_kernel"]  # baseline not rerun
    assert verdict.status == "culprits"
    assert set(verdict.culprits) == {"crashing_kernel", "wrong_kernel"}
    by_name = {r.features[0]: r for r in verdict.records if r.kind == "alone"}
    crashing = by_name["crashing_kernel"]
    assert not (crashing.started and crashing.request_ok) and crashing.crash_kind == "injected_fault"
    assert crashing.fix and crashing.log_path
    # The step keeps the server's log, and the root cause is in it.
    assert "injected fault: op 'rms_norm' raised" in Path(crashing.log_path).read_text()
    wrong = by_name["wrong_kernel"]
    assert wrong.started and wrong.request_ok and wrong.match in {"wrong", "drift"}
