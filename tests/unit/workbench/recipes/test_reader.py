"""The one recipe reader: every recipe kind reports a typo the same way, with the closest valid key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT
from workbench.accuracy.opsuite import load_cases
from workbench.bisect.plan import load_plan
from workbench.check.matrix import load_matrix
from workbench.errors import WorkbenchError
from workbench.recipes import load_serving_recipe
from workbench.sweep.spec import load_sweep_spec

RECIPES = REPO_ROOT / "recipes"


def _with_typo(source: Path, tmp_path: Path, mutate) -> Path:
    data = yaml.safe_load(source.read_text())
    mutate(data)
    target = tmp_path / source.name
    target.write_text(yaml.safe_dump(data, sort_keys=False))
    return target


def _rename(mapping: dict, old: str, new: str) -> None:
    mapping[new] = mapping.pop(old)


# (loader, shipped file, how to misspell one key, the message expected)
CASES = [
    (
        load_serving_recipe,
        "serving/cpu-tiny.yaml",
        lambda d: _rename(d["engine"], "max_num_seqs", "max_num_seq"),
        r"engine\.max_num_seq: unknown key; did you mean 'max_num_seqs'\?",
    ),
    (
        load_plan,
        "features/cpu.yaml",
        lambda d: _rename(d["features"][0], "description", "descripton"),
        r"features\[0\]\.descripton: unknown key; did you mean 'description'\?",
    ),
    (
        load_matrix,
        "matrices/cpu-embedded.yaml",
        lambda d: _rename(d["rows"][0], "torch", "trch"),
        r"rows\[0\]\.trch: unknown key; did you mean 'torch'\?",
    ),
    (
        lambda p: load_cases([p]),
        "ops/core.yaml",
        lambda d: _rename(d["ops"]["rms_norm"], "cases", "casez"),
        r"ops\.rms_norm\.casez: unknown key; did you mean 'cases'\?",
    ),
]


@pytest.mark.parametrize("loader, shipped, mutate, expected", CASES, ids=[c[1] for c in CASES])
def test_every_kind_names_file_key_and_closest_key(tmp_path, loader, shipped, mutate, expected):
    path = _with_typo(RECIPES / shipped, tmp_path, mutate)
    with pytest.raises(WorkbenchError, match=expected) as info:
        loader(path)
    assert str(info.value).startswith(str(path)), "the message names the file first"


def test_sweep_spec_typo_in_grid(tmp_path):
    path = _with_typo(
        RECIPES / "sweeps/cpu-tiny.yaml", tmp_path, lambda d: _rename(d["grid"], "max_num_seqs", "max_num_seq")
    )
    (tmp_path / "cpu-tiny.yaml").write_text(path.read_text())  # base: cpu-tiny resolves to the shipped recipe
    with pytest.raises(WorkbenchError, match=r"grid\.max_num_seq: unknown key; did you mean 'max_num_seqs'\?"):
        load_sweep_spec(path)


@pytest.mark.parametrize("loader", [load_serving_recipe, load_plan, load_matrix, lambda p: load_cases([p])])
def test_malformed_yaml_is_one_message(tmp_path, loader):
    path = tmp_path / "broken.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(WorkbenchError, match="not valid YAML"):
        loader(path)


def test_wrong_enum_value_gets_a_suggestion(tmp_path):
    path = _with_typo(RECIPES / "serving/cpu-tiny.yaml", tmp_path, lambda d: d.update(dtype="bfloat61"))
    with pytest.raises(WorkbenchError, match=r"dtype: .*\(got 'bfloat61'\); did you mean 'bfloat16'\?"):
        load_serving_recipe(path)


def test_sweep_axes_follow_engine_args():
    """A field of EngineArgs is a sweep axis and an explicit point key, with the recipe's validation
    (the JSON-valued configs and the free-text extra_args are objects, not axis values)."""
    from workbench.recipes import EngineArgs
    from workbench.sweep.spec import ServerAxes, ServerPoint

    swept = set(EngineArgs.model_fields) - {"extra_args", "additional_config", "compilation_config"}
    assert set(ServerAxes.model_fields) == swept == set(ServerPoint.model_fields)
    assert ServerAxes(tensor_parallel_size=2).axes() == {"tensor_parallel_size": (2,)}
    assert ServerAxes(kv_cache_memory_bytes=["512MiB"]).axes() == {"kv_cache_memory_bytes": (2**29,)}
    with pytest.raises(ValueError):
        ServerPoint(tensor_parallel_size=0)
