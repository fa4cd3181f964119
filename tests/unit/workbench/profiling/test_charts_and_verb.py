"""Charts are pure functions of the tables; the verb analyses a directory and writes its JSON."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from workbench.cli import main
from workbench.profiling import charts
from workbench.profiling.profile import Profile
from workbench.profiling.read import read_profile


def test_share_charts_stack_the_three_shares(fixtures):
    profile = read_profile(fixtures / "msprof_tp2")
    fig = charts.rank_share_bars(profile.ranks_frame(), profile.mapping)
    assert [t.name for t in fig.data] == ["Computing", "Communication (not overlapped)", "Free"]
    assert list(fig.data[0].y) == pytest.approx(list(profile.ranks_frame()["computing_share"]))
    assert "HCCL" in fig.layout.title.text  # the device mapping travels with the chart
    steps = charts.step_share_bars(profile.steps_frame(), profile.mapping)
    assert len(steps.data) == 3 * len(profile.ranks)
    both = charts.compare_share_bars({"a": profile.ranks_frame(), "b": profile.ranks_frame()})
    assert list(both.data[0].x) == ["a rank 0", "a rank 1", "b rank 0", "b rank 1"]


def test_op_charts_and_empty_inputs(fixtures):
    profile = read_profile(fixtures / "torch_npu_tp2")
    ops = profile.ops_frame(5)
    fig = charts.top_ops_bars(ops)
    assert sum(len(t.y) for t in fig.data) == 5
    assert {t.name for t in charts.kind_bars(profile.kinds_frame()).data} >= {"HCCL", "AI_CORE"}
    for empty in (
        charts.top_ops_bars(pd.DataFrame()),
        charts.graph_mode_bars(pd.DataFrame()),
        charts.rank_share_bars(pd.DataFrame()),
    ):
        assert "nothing to show" in empty.layout.title.text


def test_verb_analyses_a_directory_and_writes_json(fixtures, tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main(["profile", str(fixtures / "msprof_tp2"), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "mapping: NPU" in printed and "[slow_rank]" in printed
    record = json.loads(out.read_text())
    assert record["summary"]["ranks"] == 2
    assert record["profile"]["meta"]["provenance"]["stack"]["python"]  # stamped
    assert (
        Profile.from_dict(record["profile"]).ranks_frame().equals(read_profile(fixtures / "msprof_tp2").ranks_frame())
    )


def test_verb_needs_exactly_one_source(capsys, fixtures):
    assert main(["profile"]) == 2
    assert "exactly one of PATH" in capsys.readouterr().err
    assert main(["profile", str(fixtures / "msprof_tp2"), "--graph-mode"]) == 2


def test_verb_capture_passes_the_recipe_override_workload_and_env_to_the_capture(
    fixtures, tmp_path, capsys, monkeypatch
):
    """`profile --recipe`'s flags reach the capture as they are named (the capture itself runs for real in
    the integration tier's profiled sweep point and notebook 08's TP=1 and TP=2 captures)."""
    from types import SimpleNamespace

    from workbench.profiling import capture as capturing
    from workbench.verbs import profile as profile_verb

    seen = {}

    def fake_capture(recipe, out, workload, *, extra_env, progress):
        seen.update(recipe=recipe, out=out, workload=workload, env=extra_env, progress=progress)
        load = SimpleNamespace(summary=SimpleNamespace(output_throughput=12.5, failed=0))
        return capturing.Capture(read_profile(fixtures / "msprof_tp2"), load, out / "traces", None)

    monkeypatch.setattr(profile_verb, "capture", fake_capture)
    argv = [
        "profile",
        "--recipe",
        "cpu-tiny",
        "--tensor-parallel-size",
        "2",
        "--out",
        str(tmp_path / "tp2"),
        "--num-prompts",
        "8",
        "--concurrency",
        "4",
        "--input-len",
        "64",
        "--output-len",
        "16",
        "--env",
        "A=1",
        "--env",
        "B=two",
        "--no-progress",
        "--json",
        str(tmp_path / "tp2.json"),
    ]
    assert main(argv) == 0
    assert seen["recipe"].name == "cpu-tiny" and seen["recipe"].engine.tensor_parallel_size == 2
    assert seen["out"] == tmp_path / "tp2" and seen["env"] == {"A": "1", "B": "two"} and not seen["progress"]
    w = seen["workload"]
    assert (w.num_prompts, w.concurrency, w.input_len, w.output_len) == (8, 4, 64, 16)
    printed = capsys.readouterr().out
    assert "captured 2 rank(s)" in printed and "12.5 output tok/s" in printed and "verdicts:" in printed
    assert json.loads((tmp_path / "tp2.json").read_text())["summary"]["ranks"] == 2


def test_profile_path_judges_ascend_kernels_and_explains_idle_time(fixtures, capsys):
    """On torch_npu output the verb adds kernel verdicts (with the chip's core counts) and the idle causes."""
    from workbench import cli

    assert cli.main(["profile", str(fixtures / "torch_npu_tp2"), "--ai-cores", "24", "--vector-cores", "48"]) == 0
    printed = capsys.readouterr().out
    assert "kernel verdicts (" in printed and "format conversion; AI CPU fallback" in printed
    assert "low block dim" in printed  # Tril's block dim 24 on 48 vector cores
    assert cli.main(["profile", str(fixtures / "torch_npu_trace_view")]) == 0
    printed = capsys.readouterr().out
    assert "idle causes (" in printed and "unexplained" in printed  # the trimmed timeline kept no host events
