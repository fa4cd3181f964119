"""Source-build tools (fake cmake/gcc executables on PATH) and source checkouts that are or are not importable."""

from __future__ import annotations

import stat
from pathlib import Path

from tests.unit.workbench.check.fakes import make_ctx
from workbench.check.buildtools import (
    Checkout,
    check_build,
    check_checkout,
    check_cmake,
    check_gcc,
    check_pybind11,
    find_checkouts,
)
from workbench.check.result import Status


def fake_tool(bin_dir: Path, name: str, output: str) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' '{output}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def ctx_with_bin(tmp_path, **options):
    return make_ctx(tmp_path, {"PATH": str(tmp_path / "bin")}, **options)


def test_cmake_versions(tmp_path):
    assert check_cmake(ctx_with_bin(tmp_path)).status is Status.WARN  # not installed
    fake_tool(tmp_path / "bin", "cmake", "cmake version 3.13.4")
    old = check_cmake(ctx_with_bin(tmp_path))
    assert old.status is Status.FAIL and "cmake 3.13.4" in old.observed and "cmake>=3.16" in old.fix
    fake_tool(tmp_path / "bin", "cmake", "cmake version 3.16.0")
    assert check_cmake(ctx_with_bin(tmp_path)).status is Status.PASS


def test_gcc_and_gxx(tmp_path):
    assert check_gcc(ctx_with_bin(tmp_path)).status is Status.WARN
    fake_tool(tmp_path / "bin", "gcc", "gcc (Ubuntu 9.4.0-1ubuntu1~20.04.2) 9.4.0")
    no_gxx = check_gcc(ctx_with_bin(tmp_path))
    assert no_gxx.status is Status.WARN and "no g++" in no_gxx.observed
    fake_tool(tmp_path / "bin", "g++", "g++ (Ubuntu 9.4.0-1ubuntu1~20.04.2) 9.4.0")
    ok = check_gcc(ctx_with_bin(tmp_path))
    assert ok.status is Status.PASS and "gcc 9.4.0" in ok.observed


def test_pybind11_from_metadata(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    assert check_pybind11([str(site)]).status is Status.WARN
    info = site / "pybind11-2.13.6.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pybind11\nVersion: 2.13.6\n")
    result = check_pybind11([str(site)])
    assert result.status is Status.PASS and "2.13.6" in result.observed


def checkout(root: Path) -> Path:
    (root / "vllm_ascend").mkdir(parents=True)
    (root / "vllm_ascend" / "__init__.py").write_text("")
    (root / "pyproject.toml").write_text("[project]\nname = 'vllm-ascend'\n")
    return root


def test_checkout_not_on_pythonpath_fails_then_passes(tmp_path):
    src = checkout(tmp_path / "vllm-ascend")
    ctx = make_ctx(tmp_path, {"PATH": "/usr/bin:/bin"}, source_checkouts=(src,))
    found = find_checkouts(ctx)
    assert found == [Checkout(src.resolve(), "vllm_ascend")]
    missing = check_checkout(ctx, found[0])
    assert missing.status is Status.FAIL and "not importable" in missing.observed
    assert f"export PYTHONPATH={src.resolve()}" in missing.fix and "pip install -e" in missing.fix
    on_path = make_ctx(tmp_path, {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(src)})
    assert check_checkout(on_path, found[0]).status is Status.PASS


def test_checkout_shadowed_by_another_copy_warns(tmp_path):
    src = checkout(tmp_path / "vllm-ascend")
    other = checkout(tmp_path / "installed")
    ctx = make_ctx(tmp_path, {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{other}:{src}"})
    result = check_checkout(ctx, Checkout(src.resolve(), "vllm_ascend"))
    assert result.status is Status.WARN and "not the checkout" in result.observed


def test_no_checkout_is_skip(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fake_tool(tmp_path / "bin", "cmake", "cmake version 3.25.1")
    results = {r.name: r.status for r in check_build(ctx_with_bin(tmp_path))}
    assert results["build.checkout"] is Status.SKIP and results["build.cmake"] is Status.PASS


def test_given_directory_that_is_not_a_checkout_fails(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "typo").mkdir()
    results = check_build(make_ctx(tmp_path, {"PATH": "/usr/bin:/bin"}, source_checkouts=(tmp_path / "typo",)))
    checkout = [r for r in results if r.name == "build.checkout"]
    assert len(checkout) == 1 and checkout[0].status is Status.FAIL and "is not a vllm" in checkout[0].observed
