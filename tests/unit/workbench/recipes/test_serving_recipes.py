"""Serving recipes: shipped files load, and every mistake names the file, the key and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from workbench.errors import WorkbenchError
from workbench.recipes import (
    DeviceKind,
    DType,
    EngineArgs,
    list_serving_recipes,
    load_serving_recipe,
    parse_bytes,
)


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


BASE = {"name": "t", "model": "embedded:tiny", "engine": {"block_size": 32}}


def test_shipped_recipes_load_and_are_frozen():
    names = list_serving_recipes()
    assert {"cpu-tiny", "cpu-smollm2", "ascend-7b-chat"} <= set(names)
    tiny = load_serving_recipe("cpu-tiny")
    assert tiny.embedded_model == "tiny" and tiny.device is DeviceKind.CPU
    assert tiny.engine.block_size % 32 == 0
    with pytest.raises(ValidationError, match="frozen"):
        tiny.max_model_len = 5


def test_ascend_example_matches_the_source_check():
    recipe = load_serving_recipe("ascend-7b-chat")
    assert recipe.device is DeviceKind.NPU
    assert recipe.dtype is DType.FLOAT16
    assert recipe.max_model_len == 8192
    assert recipe.engine.gpu_memory_utilization == 0.85
    assert "ASCEND_RT_VISIBLE_DEVICES" in recipe.env


def test_unknown_key_names_file_key_and_closest(tmp_path):
    path = write(tmp_path, {**BASE, "engine": {"max_num_seq": 8}})
    with pytest.raises(WorkbenchError) as err:
        load_serving_recipe(path)
    message = str(err.value)
    assert str(path) in message and "engine.max_num_seq" in message and "'max_num_seqs'" in message


def test_unknown_top_level_key(tmp_path):
    with pytest.raises(WorkbenchError, match=r"max_model_length: unknown key; did you mean 'max_model_len'"):
        load_serving_recipe(write(tmp_path, {**BASE, "max_model_length": 512}))


def test_bad_enum_value_suggests_closest(tmp_path):
    with pytest.raises(WorkbenchError, match=r"dtype: .*'flaot16'.*did you mean 'float16'"):
        load_serving_recipe(write(tmp_path, {**BASE, "dtype": "flaot16"}))


def test_bad_number_names_key(tmp_path):
    with pytest.raises(WorkbenchError, match=r"engine\.gpu_memory_utilization: .*1\.5"):
        load_serving_recipe(write(tmp_path, {**BASE, "engine": {"gpu_memory_utilization": 1.5}}))


def test_missing_model(tmp_path):
    with pytest.raises(WorkbenchError, match=r"model: required key is missing"):
        load_serving_recipe(write(tmp_path, {"name": "t"}))


def test_unknown_recipe_name_suggests_shipped():
    with pytest.raises(WorkbenchError, match=r"did you mean 'cpu-tiny'"):
        load_serving_recipe("cpu-tinny")


def test_cli_args_only_for_set_fields():
    engine = EngineArgs(
        block_size=32,
        enforce_eager=True,
        enable_prefix_caching=False,
        tensor_parallel_size=2,
        extra_args=("--seed", "0"),
    )
    assert engine.cli_args() == (
        "--block-size",
        "32",
        "--no-enable-prefix-caching",
        "--enforce-eager",
        "--tensor-parallel-size",
        "2",
        "--seed",
        "0",
    )
    assert EngineArgs().cli_args() == ()


def test_kv_bytes_accept_units(tmp_path):
    recipe = load_serving_recipe(write(tmp_path, {**BASE, "engine": {"kv_cache_memory_bytes": "512MiB"}}))
    assert recipe.engine.kv_cache_memory_bytes == 512 * 2**20
    assert parse_bytes("2GiB") == 2 * 2**30 and parse_bytes(1000) == 1000
    with pytest.raises(WorkbenchError, match="kv_cache_memory_bytes"):
        load_serving_recipe(write(tmp_path, {**BASE, "engine": {"kv_cache_memory_bytes": "lots"}}))


def test_env_values_become_strings(tmp_path):
    recipe = load_serving_recipe(write(tmp_path, {**BASE, "env": {"VLLM_CPU_KVCACHE_SPACE": 2, "FLAG": True}}))
    assert recipe.env == {"VLLM_CPU_KVCACHE_SPACE": "2", "FLAG": "true"}


def test_with_overrides_merges_and_validates():
    tiny = load_serving_recipe("cpu-tiny")
    changed = tiny.with_overrides(engine={"block_size": 64}, env={"X": "1"}, max_model_len=256)
    assert changed.engine.block_size == 64 and changed.engine.max_num_seqs == tiny.engine.max_num_seqs
    assert changed.env["X"] == "1" and changed.max_model_len == 256
    assert tiny.engine.block_size == 32  # the original is untouched
    with pytest.raises(WorkbenchError, match="engine.block_sise: unknown key; did you mean 'block_size'"):
        tiny.with_overrides(engine={"block_sise": 64})


def test_relative_model_path_is_relative_to_recipe(tmp_path):
    (tmp_path / "ckpt").mkdir()
    recipe = load_serving_recipe(write(tmp_path, {**BASE, "model": "ckpt"}))
    assert recipe.local_model_path() == (tmp_path / "ckpt").resolve()
    hub = load_serving_recipe(write(tmp_path, {**BASE, "model": "Qwen/Qwen2.5-7B-Instruct"}))
    assert hub.local_model_path() is None
