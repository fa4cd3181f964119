"""The backend's shipped data agrees with the workbench's matrix, and every recipe in the table is implemented."""

from __future__ import annotations

import yaml
from packaging.version import Version

from ascend_backend.npu.guard import NpuOp
from ascend_backend.platform.kernels import RECIPES, kernel_table, releases
from ascend_backend.registry import REGISTRY, Backend
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


def test_every_npu_implementation_comes_from_the_guard_factory():
    adapters = {
        op: REGISTRY.entry(op).impls[Backend.NPU] for op in REGISTRY.ops() if Backend.NPU in REGISTRY.entry(op).impls
    }
    assert adapters and all(isinstance(impl, NpuOp) for impl in adapters.values()), adapters
    assert {op: REGISTRY.entry(op).supports[Backend.NPU] for op in adapters} == {
        op: impl.supports for op, impl in adapters.items()
    }


def test_every_recipe_is_implemented_by_an_adapter():
    adapters = {op: REGISTRY.entry(op).impls.get(Backend.NPU) for op in REGISTRY.ops()}
    implemented = {op: frozenset(impl.recipes) for op, impl in adapters.items() if impl is not None}
    declared = {op: frozenset(recipes) for op, recipes in RECIPES.items() if recipes}
    assert implemented == declared


def test_every_table_recipe_is_declared():
    for row in kernel_table():
        assert row.recipe == "native" or row.recipe in RECIPES[row.op], row.id


def test_every_row_that_makes_a_call_cites_its_line():
    # TAG:source:line for every row whose vllm-ascend side is a call; a row without a line says there is none
    # (no override registered in that release: vLLM's own forward_native runs).
    for row in kernel_table():
        assert row.tag and row.source, row.id
        if row.line is None:
            assert row.kernel == "native" and ("no " in row.where or "no " in row.vllm_ascend), row.id
