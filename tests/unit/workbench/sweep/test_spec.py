"""Sweep specs: shipped files load, points expand with stable ids, every mistake names file, key and fix."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from workbench.errors import WorkbenchError
from workbench.sweep.spec import (
    config_points,
    expand,
    list_sweep_specs,
    load_base_recipe,
    load_sweep_spec,
    server_configs,
    workload_points,
)

BASE = {
    "name": "t",
    "base": "cpu-tiny",
    "grid": {"max_num_seqs": [2, 8], "block_size": [32, 64]},
    "workload": {"input_len": 64, "output_len": 16, "num_prompts": 4, "concurrency": [1, 4]},
    "repeats": 2,
    "slo": {"p99_ttft_ms": 1000},
}


def write(tmp_path: Path, data: dict, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def with_changes(**changes) -> dict:
    data = yaml.safe_load(yaml.safe_dump(BASE))
    for dotted, value in changes.items():
        target = data
        *parents, last = dotted.split(".")
        for part in parents:
            target = target[part]
        if value is None:
            target.pop(last, None)
        else:
            target[last] = value
    return data


def test_shipped_specs_load():
    assert {"cpu-tiny", "cpu-tiny-quick", "ascend-7b-chat"} <= set(list_sweep_specs())
    spec = load_sweep_spec("cpu-tiny")
    points = expand(spec)
    assert len(points) == 4 and len({p.server_key for p in points}) == 2
    assert load_sweep_spec("cpu-tiny-quick").adaptive is None
    assert load_sweep_spec("cpu-tiny").adaptive.kv_cache_memory_bytes == (2**30, 256 * 2**20)


def test_grid_times_workloads_times_repeats(tmp_path):
    spec = load_sweep_spec(write(tmp_path, BASE))
    points = expand(spec)
    assert len(points) == 4 * 2 * 2
    # grid order: the first key varies slowest; all points of one server are adjacent
    assert [dict(p.params) for p in points[::4]] == [
        {"max_num_seqs": 2, "block_size": 32},
        {"max_num_seqs": 2, "block_size": 64},
        {"max_num_seqs": 8, "block_size": 32},
        {"max_num_seqs": 8, "block_size": 64},
    ]
    assert [(p.workload.concurrency, p.repeat) for p in points[:4]] == [(1, 0), (1, 1), (4, 0), (4, 1)]
    assert len({p.point_id for p in points}) == 16
    assert points[0].recipe.engine.block_size == 32 and points[0].recipe.engine.max_num_seqs == 2
    assert points[0].recipe.max_model_len == 1024  # the rest comes from the base recipe


def test_ids_are_stable_and_depend_only_on_what_is_measured(tmp_path):
    first = expand(load_sweep_spec(write(tmp_path, BASE)))
    renamed = expand(load_sweep_spec(write(tmp_path, {**BASE, "name": "other", "description": "x"}, "b.yaml")))
    assert [p.point_id for p in first] == [p.point_id for p in renamed]
    changed = expand(load_sweep_spec(write(tmp_path, with_changes(**{"workload.output_len": 17}), "c.yaml")))
    assert not {p.point_id for p in first} & {p.point_id for p in changed}
    assert {p.server_key for p in first} == {p.server_key for p in changed}  # same servers, other load


def test_explicit_points_and_duplicates(tmp_path):
    data = with_changes(grid=None)
    data["points"] = [
        {"max_num_seqs": 4, "kv_cache_memory_bytes": "512MiB"},
        {"max_num_seqs": 4, "kv_cache_memory_bytes": 536870912},
    ]
    spec = load_sweep_spec(write(tmp_path, data))
    assert server_configs(spec) == [{"max_num_seqs": 4, "kv_cache_memory_bytes": 536870912}]


def test_request_rate_workloads():
    from workbench.sweep.spec import WorkloadSpec

    spec = WorkloadSpec(input_len=[8, 16], output_len=4, num_prompts=3, request_rate=[1.0, 2.5], concurrency=8)
    points = workload_points(spec)
    assert [(p.input_len, p.request_rate, p.concurrency) for p in points] == [
        (8, 1.0, 8),
        (8, 2.5, 8),
        (16, 1.0, 8),
        (16, 2.5, 8),
    ]
    assert points[1].label == "in=8 out=4 rate=2.5/s"
    assert points[1].to_loadgen().request_rate == 2.5


def test_slo_per_request_takes_the_tightest_limit():
    from workbench.sweep.spec import SLOSpec

    slo = SLOSpec(p90_ttft_ms=500, p99_ttft_ms=800, p99_e2el_ms=4000).per_request()
    assert (slo.ttft_ms, slo.tpot_ms, slo.e2el_ms) == (500, None, 4000)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"grid.max_num_seq": [1]}, "grid.max_num_seq: unknown key; did you mean 'max_num_seqs'?"),
        ({"workload.concurency": [1]}, "workload.concurency"),
        ({"slo.p99_ttft": 5}, "slo.p99_ttft: unknown key; did you mean 'p99_ttft_ms'?"),
        ({"repeat": 2}, "repeat: unknown key; did you mean 'repeats'?"),
        ({"workload.num_prompts": None}, "workload.num_prompts: required key is missing"),
        ({"workload.concurrency": None}, "give concurrency"),
        ({"workload.prefix_ratio": 1.5}, "prefix_ratio must be in [0, 1), got [1.5]"),
        ({"grid.kv_cache_memory_bytes": ["lots"]}, "is not a byte count"),
        ({"repeats": 0}, "repeats: Input should be greater than or equal to 1"),
    ],
)
def test_errors_name_file_key_and_fix(tmp_path, change, expected):
    path = write(tmp_path, with_changes(**change))
    with pytest.raises(WorkbenchError) as err:
        load_sweep_spec(path)
    assert str(path) in str(err.value)
    assert expected in str(err.value)


def test_unknown_key_in_points_and_misspelt_base(tmp_path):
    data = with_changes(grid=None)
    data["points"] = [{"blok_size": 32}]
    with pytest.raises(WorkbenchError, match=r"points\[0\]\.blok_size: unknown key; did you mean 'block_size'\?"):
        load_sweep_spec(write(tmp_path, data))
    with pytest.raises(WorkbenchError, match="base: .*did you mean 'cpu-tiny'"):
        load_sweep_spec(write(tmp_path, with_changes(base="cpu-tinny")))


def test_cpu_base_rejects_utilisation_budget(tmp_path):
    with pytest.raises(WorkbenchError, match="sweep kv_cache_memory_bytes"):
        load_sweep_spec(write(tmp_path, with_changes(**{"grid.gpu_memory_utilization": [0.9]})))


def test_invalid_engine_value_is_caught_at_load(tmp_path):
    with pytest.raises(WorkbenchError, match="max_num_seqs"):
        load_sweep_spec(write(tmp_path, with_changes(**{"grid.max_num_seqs": [0]})))


def test_spec_not_found_suggests_a_shipped_name():
    with pytest.raises(WorkbenchError, match="did you mean 'cpu-tiny'"):
        load_sweep_spec("cpu-tyni")


def test_config_points_share_one_server(tmp_path):
    spec = load_sweep_spec(write(tmp_path, BASE))
    points = config_points(spec, load_base_recipe(spec), {"max_num_seqs": 3})
    assert len(points) == 4 and len({p.server_key for p in points}) == 1
