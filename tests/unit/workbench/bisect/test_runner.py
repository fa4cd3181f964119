"""Bisect logic with a scripted probe: step order, verdicts, pair narrowing and resumption.

The probe is the boundary to a real vLLM server (tested in tests/integration/test_bisect.py); here it
answers from a script so every branch of the bisect is checked exactly.
"""

from __future__ import annotations

import pytest

from tests.conftest import REPO_ROOT
from workbench.bisect.outputs import GreedyOutput
from workbench.bisect.plan import load_plan
from workbench.bisect.runner import Bisect, StepRecord, StepStore, check_resumable
from workbench.errors import WorkbenchError
from workbench.recipes import load_serving_recipe

PLAN_TEXT = """
name: test
target: cpu
baseline: {name: baseline, engine: {enforce_eager: true}}
features:
  - {name: a, engine: {enable_prefix_caching: true}}
  - {name: b, engine: {enable_chunked_prefill: true}}
  - {name: c, env: {X: "1"}}
  - {name: q, supported: false, unsupported_reason: no quantized model here}
order: [a, b, c, q]
compare: {prompts: ["x"], max_tokens: 2}
"""

GOOD = [GreedyOutput("x", (1, 2), (-0.1, -0.2), (((1, -0.1),), ((2, -0.2),)), "ok").to_dict()]
WRONG = [GreedyOutput("x", (7, 7), (-0.1, -0.2), (((7, -0.1),), ((7, -0.2),)), "no").to_dict()]


class ScriptedProbe:
    """Answers per feature set: 'crash', 'wrong', or good outputs; records what was probed."""

    def __init__(self, script):
        self.script, self.calls = script, []

    def __call__(self, recipe, kind, features, key, log_dir):
        self.calls.append(key)
        outcome = self.script.get(key, "good")
        if outcome == "crash":
            return StepRecord(
                key,
                kind,
                features,
                False,
                False,
                None,
                None,
                "No common block size",
                crash_kind="block_size",
                crash_summary="No common block size",
                fix="use 32",
            )
        return StepRecord(
            key,
            kind,
            features,
            True,
            True,
            None,
            None,
            "answered",
            outputs=tuple(WRONG if outcome == "wrong" else GOOD),
        )


@pytest.fixture
def setup(tmp_path):
    plan_path = tmp_path / "plan.yaml"
    plan_path.write_text(PLAN_TEXT)
    return load_serving_recipe(REPO_ROOT / "recipes/serving/cpu-tiny.yaml"), load_plan(plan_path), tmp_path / "out"


def test_all_pass_runs_baseline_alone_and_cumulative(setup):
    recipe, plan, out = setup
    probe = ScriptedProbe({})
    verdict = Bisect(recipe, plan, out, probe=probe).run(progress=False)
    assert verdict.status == "all_pass"
    assert probe.calls == ["baseline", "a", "b", "c", "a+b", "a+b+c"]  # q skipped, never probed
    skipped = [r for r in verdict.records if r.kind == "skipped"]
    assert [r.features for r in skipped] == [("q",)] and "no quantized model" in skipped[0].detail


def test_crashing_feature_is_the_culprit(setup):
    recipe, plan, out = setup
    verdict = Bisect(recipe, plan, out, probe=ScriptedProbe({"b": "crash"})).run(progress=False)
    assert verdict.status == "culprits" and verdict.culprits == ("b",)
    assert "block_size" in verdict.message and "use 32" in verdict.message


def test_wrong_answers_are_caught(setup):
    recipe, plan, out = setup
    verdict = Bisect(recipe, plan, out, probe=ScriptedProbe({"c": "wrong"})).run(progress=False)
    assert verdict.culprits == ("c",) and "answers differently" in verdict.message


def test_interaction_is_narrowed_to_a_pair(setup):
    recipe, plan, out = setup
    probe = ScriptedProbe({"a+b+c": "crash", "a+c": "crash"})
    verdict = Bisect(recipe, plan, out, probe=probe).run(progress=False)
    assert verdict.status == "interaction" and verdict.culprits == ("a", "c")
    assert probe.calls[-2:] == ["a+c", "b+c"]


def test_baseline_failure_stops_the_run(setup):
    recipe, plan, out = setup
    probe = ScriptedProbe({"baseline": "crash"})
    verdict = Bisect(recipe, plan, out, probe=probe).run(progress=False)
    assert verdict.status == "baseline_fails" and probe.calls == ["baseline"]


def test_interrupted_run_resumes_without_rerunning_steps(setup):
    recipe, plan, out = setup

    class Interrupt(Exception):
        pass

    first = ScriptedProbe({})

    def interrupting(*args):
        if len(first.calls) == 3:
            raise Interrupt
        return first(*args)

    with pytest.raises(Interrupt):
        Bisect(recipe, plan, out, probe=interrupting).run(progress=False)
    assert first.calls == ["baseline", "a", "b"]
    second = ScriptedProbe({})
    verdict = Bisect(recipe, plan, out, probe=second).run(progress=False)
    assert verdict.status == "all_pass"
    assert second.calls == ["c", "a+b", "a+b+c"]


def test_torn_last_line_is_ignored(setup):
    _, _, out = setup
    store = StepStore(out)
    store.append(StepRecord("baseline", "baseline", (), True, True, "exact", 0.0, "ok"))
    with open(store.path, "a") as fh:
        fh.write('{"key": "a", "kind"')
    assert list(store.load()) == ["baseline"]


def test_resume_refuses_another_recipe(tmp_path):
    check_resumable(tmp_path, "abc")
    check_resumable(tmp_path, "abc")
    with pytest.raises(WorkbenchError, match="different recipe"):
        check_resumable(tmp_path, "xyz")


@pytest.mark.parametrize(
    "change,message",
    [
        ("order: [a, b, c, q, zz]", "not a feature"),
        ("order: [a, b]", "leaves out"),
        (
            "features:\n  - {name: a, engine: {enable_prefix_cachin: true}}\norder: [a]",
            "did you mean 'enable_prefix_caching'",
        ),
        ("featurez: []", "unknown key"),
    ],
)
def test_bad_plans_name_the_file_and_key(tmp_path, change, message):
    text = PLAN_TEXT
    key = change.split(":")[0]
    lines = [ln for ln in text.splitlines() if not ln.startswith(key)]
    if key == "features":
        lines = [ln for ln in lines if not ln.startswith("  - ") and not ln.startswith("order")]
    path = tmp_path / "bad.yaml"
    path.write_text("\n".join(lines) + "\n" + change + "\n")
    with pytest.raises(WorkbenchError, match=message) as info:
        load_plan(path)
    assert str(path) in str(info.value)


def test_shipped_plans_load():
    for path in (REPO_ROOT / "recipes/features").glob("*.yaml"):
        plan = load_plan(path)
        assert plan.order and plan.baseline.name == "baseline"
