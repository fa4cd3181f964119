"""A server started from inside a notebook lane sizes its threads as anywhere else: the lane's cap stays behind."""

from __future__ import annotations

from workbench.run.runner import lane_threads
from workbench.serving.launch_plan import LANE_THREADS_VAR, server_environ


def test_a_lane_caps_its_kernel_at_its_share_of_the_cores_unless_the_user_set_one(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert lane_threads(2, {}) == {"OMP_NUM_THREADS": "2", LANE_THREADS_VAR: "2"}
    assert lane_threads(8, {}) == {"OMP_NUM_THREADS": "1", LANE_THREADS_VAR: "1"}
    assert lane_threads(1, {}) == {}  # one lane: torch's default, every core
    assert lane_threads(2, {"OMP_NUM_THREADS": "3"}) == {}  # the user's own setting wins


def test_a_server_drops_the_lane_cap_but_keeps_a_users_own_setting(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv(LANE_THREADS_VAR, "1")
    env = server_environ((("VLLM_CPU_KVCACHE_SPACE", "1"),))
    assert "OMP_NUM_THREADS" not in env and LANE_THREADS_VAR not in env and env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    # a recipe's own thread count (the engine's, at TP=1: vLLM reads OMP_NUM_THREADS) survives the lane's removal
    assert server_environ({"OMP_NUM_THREADS": "2"})["OMP_NUM_THREADS"] == "2"
    monkeypatch.delenv(LANE_THREADS_VAR)
    assert server_environ({})["OMP_NUM_THREADS"] == "1"  # set by the user, not by a lane: passed on
    assert server_environ({"OMP_NUM_THREADS": "4"})["OMP_NUM_THREADS"] == "4"  # a recipe's env wins
