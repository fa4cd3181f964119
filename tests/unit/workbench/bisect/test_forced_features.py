"""A feature the platform forces is not a switch: the plan says where it is forced, bisect skips and labels it."""

from __future__ import annotations

import pytest

from tests.conftest import REPO_ROOT
from tests.unit.workbench.bisect.test_runner import ScriptedProbe
from workbench.bisect.plan import load_plan
from workbench.bisect.runner import Bisect
from workbench.errors import WorkbenchError
from workbench.recipes import load_serving_recipe

PLAN = """
name: forced
target: ascend
baseline: {name: baseline, engine: {enforce_eager: true}}
features:
  - {name: a, engine: {enable_prefix_caching: true}}
  - name: ops
    compilation: {custom_ops: ["all"]}
    forced_by: "vllm_ascend/platform.py@v0.23.0 lines 673-675"
    forced_reason: "custom_ops is set to all on every chip but 310P"
  - {name: b, engine: {enable_chunked_prefill: true}}
order: [a, ops, b]
compare: {prompts: ["x"], max_tokens: 2}
"""


def test_forced_feature_is_skipped_with_its_source_and_never_probed(tmp_path):
    plan_path = tmp_path / "plan.yaml"
    plan_path.write_text(PLAN)
    recipe = load_serving_recipe(REPO_ROOT / "recipes/serving/cpu-tiny.yaml")
    probe = ScriptedProbe({})
    verdict = Bisect(recipe, load_plan(plan_path), tmp_path / "out", probe=probe).run(progress=False)
    assert verdict.status == "all_pass"
    assert "ops" not in " ".join(probe.calls)
    ops = next(r for r in verdict.records if r.features == ("ops",))
    assert ops.kind == "skipped" and "forced by the platform" in ops.detail
    assert "platform.py@v0.23.0 lines 673-675" in ops.detail and "every chip but 310P" in ops.detail
    assert probe.calls == ["baseline", "a", "b", "a+b"]


def test_forced_by_needs_its_reason(tmp_path):
    plan_path = tmp_path / "plan.yaml"
    plan_path.write_text(PLAN.replace('    forced_reason: "custom_ops is set to all on every chip but 310P"\n', ""))
    with pytest.raises(WorkbenchError, match="forced_by and forced_reason go together"):
        load_plan(plan_path)


def test_the_ascend_plan_marks_custom_ops_as_forced_by_vllm_ascend():
    plan = load_plan(REPO_ROOT / "recipes/features/ascend.yaml")
    custom_ops = plan.feature("custom_ops")
    assert custom_ops.forced_by.startswith("vllm_ascend/platform.py@v0.23.0")
    assert "310P" in custom_ops.forced_reason
    assert not any(f.forced_by for f in plan.features if f.name != "custom_ops")
