"""A serving recipe's `dump:` section: validated like any recipe key, turned into the plugin's switch."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascend_backend.vllm_plugin.dump import DumpRequest
from workbench.errors import WorkbenchError
from workbench.recipes import load_serving_recipe
from workbench.serving.server import launch_env

RECIPE = """\
name: dumping
model: embedded:tiny
engine: {{enforce_eager: {eager}, block_size: 32}}
dump:
  dir: {dir}
  steps: 3
  modules: ["model.layers.*", "logits_processor"]
  layers: [0, 2]
"""


def write(tmp_path: Path, **fields) -> Path:
    path = tmp_path / "dumping.yaml"
    path.write_text(RECIPE.format(**fields))
    return path


def test_the_dump_section_becomes_ascend_backend_dump(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    recipe = load_serving_recipe(write(tmp_path, eager="true", dir="dumps/engine"))
    env = launch_env(recipe, True, None)
    request = DumpRequest.parse(env["ASCEND_BACKEND_DUMP"])
    assert request.directory == tmp_path / "dumps" / "engine"  # absolute: the engine's cwd may differ
    assert (request.steps, request.modules, request.layers) == (
        3,
        ("model.layers.*", "logits_processor"),
        frozenset({0, 2}),
    )
    assert "ASCEND_BACKEND_DUMP" not in launch_env(load_serving_recipe("cpu-tiny"), True, None)


def test_dumping_needs_an_eager_engine_and_valid_keys(tmp_path):
    with pytest.raises(WorkbenchError, match="enforce_eager: true"):
        load_serving_recipe(write(tmp_path, eager="false", dir="d"))
    path = write(tmp_path, eager="true", dir="d")
    path.write_text(path.read_text().replace("steps: 3", "step: 3"))
    with pytest.raises(WorkbenchError, match=r"dump\.step: unknown key; did you mean 'steps'"):
        load_serving_recipe(path)
