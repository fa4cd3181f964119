"""The backend's shipped data agrees with the workbench's matrix, and every recipe in the table is implemented."""

from __future__ import annotations

import yaml
from packaging.version import Version

import ascend_backend.attention.npu as attention_npu
import ascend_backend.ops.activation as activation
import ascend_backend.ops.multimodal_rotary as multimodal_rotary
import ascend_backend.ops.norm as norm
import ascend_backend.ops.rotary as rotary
from ascend_backend.npu.kernels import RECIPES, kernel_table, releases
from tests.conftest import REPO_ROOT


def test_release_data_is_the_verified_matrix():
    matrix = yaml.safe_load((REPO_ROOT / "recipes/matrices/vllm-ascend.yaml").read_text())
    expected = {(Version(r["vllm_ascend"]), r["torch_npu"], r["cann"]) for r in matrix["rows"]}
    shipped = {(r.release, r.torch_npu, r.cann) for r in releases() if r.in_matrix}
    assert shipped == expected


def test_releases_outside_the_matrix_are_only_newer_ones():
    # The table may know tags the matrix does not list yet (read from the tag itself); never older gaps.
    newest_in_matrix = max(r.release for r in releases() if r.in_matrix)
    assert all(r.release > newest_in_matrix for r in releases() if not r.in_matrix)


def test_every_recipe_is_implemented_by_an_adapter():
    implemented: dict[str, frozenset[str]] = {}
    for module in (attention_npu, rotary, multimodal_rotary, norm, activation):
        implemented.update(module.IMPLEMENTED)
    declared = {op: frozenset(recipes) for op, recipes in RECIPES.items() if recipes}
    assert implemented == declared


def test_every_table_recipe_is_declared():
    for row in kernel_table():
        assert row.recipe == "native" or row.recipe in RECIPES[row.op], row.id
