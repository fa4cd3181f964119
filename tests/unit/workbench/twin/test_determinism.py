"""The reproducibility record of a side and the notes it gives before the verdict is read."""

from __future__ import annotations

from workbench.recipes import load_serving_recipe
from workbench.twin.determinism import notes, side_record
from workbench.twin.sides import Side


def test_a_launched_side_records_seeds_switches_batch_and_its_environment(monkeypatch):
    monkeypatch.delenv("HCCL_DETERMINISTIC", raising=False)
    recipe = load_serving_recipe("cpu-tiny").with_overrides(engine={"extra_args": ["--seed", "7"]})
    side = Side("B", recipe=recipe, batch=16)
    env = {"VLLM_CPU_OMP_THREADS_BIND": "0|1", "HCCL_DETERMINISTIC": "true", "HF_HUB_OFFLINE": "1"}
    record = side_record(side, env, request_seed=0)
    assert (record["engine_seed"], record["request_seed"], record["batch"], record["max_num_seqs"]) == (7, 0, 16, 32)
    assert record["switches"]["HCCL_DETERMINISTIC"] == "true" and record["switches"]["LCCL_DETERMINISTIC"] is None
    assert record["environment"] == {"HCCL_DETERMINISTIC": "true", "VLLM_CPU_OMP_THREADS_BIND": "0|1"}
    attached = side_record(Side("A", url="http://h:1"), None, 0)
    assert attached["switches"] == "unknown (attached server)" and attached["engine_seed"] is None


def test_notes_name_an_npu_side_without_deterministic_collectives_and_a_batch_the_engine_caps():
    npu = load_serving_recipe("cpu-tiny").with_overrides(device="npu")
    a, b = Side("A", recipe=npu, batch=64), Side("B", recipe=npu, batch=1)
    records = {
        "A": side_record(a, {}, 0),
        "B": side_record(b, {"HCCL_DETERMINISTIC": "true", "LCCL_DETERMINISTIC": "1"}, 0),
    }
    said = notes((a, b), records)
    assert len(said) == 2
    assert "side A runs on an NPU without HCCL_DETERMINISTIC, LCCL_DETERMINISTIC" in said[0]
    assert "64 prompts per request" in said[1] and "max_num_seqs" in said[1]
