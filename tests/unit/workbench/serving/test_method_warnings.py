"""Warnings where docs/METHOD.md warns: NPU memory utilisation above 0.95 in recipes and sweeps (§11),
Ascend sweep block sizes vllm-ascend accepts (§11), prompts too short to measure by (§10)."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml

from ascend_backend.kv_cache.sizing import NPU_UTILIZATION_CEILING, DeviceKind, utilization_warning
from tests.conftest import REPO_ROOT
from workbench import cli
from workbench.recipes import load_serving_recipe
from workbench.recipes.serving import RecipeWarning, recipe_warnings
from workbench.sweep.spec import expand, load_sweep_spec
from workbench.verbs.bench import SHORT_PROMPT_TOKENS, short_prompt_warning

NPU_RECIPE = """\
name: npu-hot
device: npu
model: /data/models/any
engine: {{gpu_memory_utilization: {utilization}, block_size: 128}}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_npu_recipe_above_the_ceiling_warns_with_sizings_words(tmp_path):
    path = write(tmp_path, "npu-hot.yaml", NPU_RECIPE.format(utilization=0.97))
    with pytest.warns(RecipeWarning) as caught:
        recipe = load_serving_recipe(path)
    (message,) = [str(w.message) for w in caught]
    # the one statement of the rule lives in ascend_backend.kv_cache.sizing; the recipe names file and field
    assert utilization_warning(DeviceKind.NPU, 0.97) in message
    assert str(path) in message and "engine.gpu_memory_utilization" in message and "§11" in message
    assert recipe.engine.gpu_memory_utilization == 0.97  # a warning, never a refusal


@pytest.mark.parametrize("utilization", [0.85, NPU_UTILIZATION_CEILING])
def test_npu_recipe_at_or_below_the_ceiling_is_quiet(tmp_path, utilization):
    path = write(tmp_path, "npu-ok.yaml", NPU_RECIPE.format(utilization=utilization))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecipeWarning)
        load_serving_recipe(path)


def test_the_same_value_on_cpu_or_cuda_is_not_an_npu_problem(tmp_path):
    for device in ("cuda", "cpu"):
        text = NPU_RECIPE.format(utilization=0.97).replace("device: npu", f"device: {device}")
        recipe = load_serving_recipe(write(tmp_path, f"{device}.yaml", text))
        assert recipe_warnings(recipe) == ()


def test_shipped_recipes_and_sweeps_follow_the_method():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecipeWarning)
        for name in ("cpu-tiny", "cpu-smollm2", "ascend-7b-chat"):
            load_serving_recipe(name)
        for name in ("cpu-tiny", "ascend-7b-chat"):
            load_sweep_spec(name)


def sweep(tmp_path: Path, grid: dict, adaptive: dict | None = None) -> Path:
    write(tmp_path, "base.yaml", NPU_RECIPE.format(utilization=0.9))
    spec = {
        "name": "hot",
        "base": "base.yaml",
        "grid": grid,
        "workload": {"input_len": 1024, "output_len": 128, "num_prompts": 8, "concurrency": [4]},
    }
    if adaptive:
        spec["adaptive"] = adaptive
    return write(tmp_path, "hot.yaml", yaml.safe_dump(spec))


def test_sweep_points_and_adaptive_budgets_above_the_ceiling_warn(tmp_path):
    path = sweep(
        tmp_path,
        {"gpu_memory_utilization": [0.9, 0.97], "max_num_seqs": [8, 16]},
        {"gpu_memory_utilization": [0.98, 0.9], "max_num_seqs": [8], "max_num_batched_tokens": [2048]},
    )
    with pytest.warns(RecipeWarning) as caught:
        load_sweep_spec(path)
    messages = [str(w.message) for w in caught]
    hot_points = [m for m in messages if ": point {" in m and "'gpu_memory_utilization': 0.97}" in m]
    assert len(hot_points) == 2  # one per server configuration with 0.97 (x max_num_seqs 8 and 16)
    assert any("adaptive.gpu_memory_utilization 0.98" in m for m in messages)
    assert len(messages) == 3  # the 0.9 points and budget are quiet
    assert all(str(path) in m for m in messages)


def test_the_cli_shows_recipe_warnings(tmp_path):
    path = sweep(tmp_path, {"gpu_memory_utilization": [0.99]})
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench.cli",
            "sweep",
            "--spec",
            str(path),
            "--out",
            str(tmp_path / "out"),
            "--report-only",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
    )
    assert "RecipeWarning" in out.stderr and "--gpu-memory-utilization 0.99 is above 0.95 on an NPU" in out.stderr


# Reading a recipe that sets no utilization must not import ascend_backend (whose __init__ imports
# torch): every sweep reads its recipes before its first server starts, so it would wait for torch.
_READ_WITHOUT_TORCH = """
import sys
from workbench.recipes import load_serving_recipe
from workbench.sweep.spec import expand, load_base_recipe, load_sweep_spec
spec = load_sweep_spec("cpu-tiny")
points = expand(spec, load_base_recipe(spec))
load_serving_recipe("cpu-tiny")
# The recipe's device enum and the utilization rule are ascend_backend's torch-free modules; the registry,
# the ops and torch must stay out (every sweep, serve and bench reads a recipe before its first server).
print(len(points), sorted(m for m in ("torch", "ascend_backend.registry", "ascend_backend.ops") if m in sys.modules))
"""


def test_reading_a_cpu_recipe_and_sweep_does_not_import_torch():
    out = subprocess.run(
        [sys.executable, "-c", _READ_WITHOUT_TORCH], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split(maxsplit=1) == [str(len(expand(load_sweep_spec("cpu-tiny")))), "[]\n"]


def test_ascend_sweep_compares_block_sizes_vllm_ascend_accepts():
    spec = load_sweep_spec("ascend-7b-chat")
    sizes = spec.grid.block_size
    # vllm-ascend's dense attention runs 128-token kernel blocks; vLLM splits manager blocks that are
    # multiples of it, so these are the sizes that start (16/32/64 fail with "No common block size").
    assert len(sizes) >= 2 and all(size % 128 == 0 for size in sizes)
    # vllm-ascend resets any other size to 128 when prefix caching or chunked prefill is on: keep them off
    for point in expand(spec):
        engine = point.recipe.engine
        assert engine.enable_prefix_caching is False and engine.enable_chunked_prefill is False
    assert {p.recipe.engine.block_size for p in expand(spec)} == set(sizes)


def test_bench_warns_below_the_short_prompt_limit(capsys):
    assert short_prompt_warning(SHORT_PROMPT_TOKENS) is None
    message = short_prompt_warning(SHORT_PROMPT_TOKENS - 1)
    assert f"--input-len {SHORT_PROMPT_TOKENS - 1}" in message and "§10" in message
    # The CLI prints it before anything runs (here the server URL is unreachable, so bench stops after it).
    code = cli.main(
        [
            "bench",
            "--url",
            "http://127.0.0.1:9",
            "--input-len",
            "16",
            "--output-len",
            "4",
            "--num-prompts",
            "1",
            "--concurrency",
            "1",
        ]
    )
    err = capsys.readouterr().err
    assert "warning: --input-len 16 is below" in err and code == 2
