"""Tools a source build of vllm-ascend needs, and whether a source checkout is importable.

The three classic build failures (docs/METHOD.md §3): "Can not find CANN" (covered by the CANN checks), CMake older than
3.16, and `import vllm` / `import vllm_ascend` failing after a clone because the checkout is neither on
PYTHONPATH nor installed editable. The importability test runs `importlib.util.find_spec` in a child
interpreter with the environment under test, so PYTHONPATH and editable-install hooks count exactly as
they will for the server.
"""

from __future__ import annotations

import importlib.metadata as metadata
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from workbench.check.context import CheckContext
from workbench.check.result import CheckResult, Group, failed, passed, skipped, warned

G = Group.BUILD
MIN_CMAKE = Version("3.16")
SOURCE_ONLY = "only needed to build vllm-ascend (or its custom ops) from source"


def _tool_version(ctx: CheckContext, tool: str, pattern: str) -> tuple[str | None, str | None]:
    """(path, version) of `tool --version`; version None when it could not be read."""
    path = ctx.which(tool)
    if path is None:
        return None, None
    try:
        done = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=ctx.command_timeout_s, env=ctx.subprocess_env()
        )
    except (OSError, subprocess.TimeoutExpired):
        return path, None
    match = re.search(pattern, done.stdout + done.stderr)
    return path, match.group(1) if match else None


def check_cmake(ctx: CheckContext) -> CheckResult:
    name = "build.cmake"
    path, version = _tool_version(ctx, "cmake", r"cmake version (\d+\.\d+(?:\.\d+)?)")
    expected = f"cmake >= {MIN_CMAKE}"
    if path is None:
        return warned(name, G, "cmake not on PATH", expected, f"pip install 'cmake>={MIN_CMAKE}' ({SOURCE_ONLY})")
    if version is None:
        return warned(name, G, f"{path}: version unreadable", expected, f"pip install -U cmake ({SOURCE_ONLY})")
    if Version(version) < MIN_CMAKE:
        return failed(
            name,
            G,
            f"cmake {version} ({path})",
            expected,
            f"pip install -U 'cmake>={MIN_CMAKE}' and make sure it comes first on PATH; the Ascend build "
            "scripts stop on older CMake",
        )
    return passed(name, G, f"cmake {version} ({path})", expected)


def check_gcc(ctx: CheckContext) -> CheckResult:
    name = "build.gcc"
    path, version = _tool_version(ctx, "gcc", r"\) (\d+\.\d+(?:\.\d+)?)")
    if path is None:
        return warned(
            name,
            G,
            "gcc not on PATH",
            "gcc and g++",
            f"apt-get install -y gcc g++ (or yum install gcc gcc-c++); {SOURCE_ONLY}",
        )
    if ctx.which("g++") is None:
        return warned(
            name,
            G,
            f"gcc {version} ({path}) but no g++",
            "gcc and g++",
            f"apt-get install -y g++ (or yum install gcc-c++); {SOURCE_ONLY}",
        )
    return passed(name, G, f"gcc {version or '?'} ({path})", "gcc and g++")


def check_pybind11(search_path: list[str] | None = None) -> CheckResult:
    name = "build.pybind11"
    try:
        dist = next(iter(metadata.distributions(name="pybind11", path=search_path or sys.path)))
    except StopIteration:
        return warned(name, G, "pybind11 not installed", "pybind11", f"pip install pybind11 ({SOURCE_ONLY})")
    return passed(name, G, f"pybind11 {dist.version}", "pybind11")


# -- source checkouts -------------------------------------------------------------------------------------

PACKAGES = ("vllm_ascend", "vllm")


@dataclass(frozen=True)
class Checkout:
    path: Path
    package: str  # the top-level package the checkout contains


def as_checkout(path: Path) -> Checkout | None:
    """`path` as a source checkout (a project file plus `vllm_ascend/` or `vllm/`), else None."""
    has_project = (path / "setup.py").is_file() or (path / "pyproject.toml").is_file()
    for package in PACKAGES:
        if has_project and (path / package / "__init__.py").is_file():
            return Checkout(path.resolve(), package)
    return None


def find_checkouts(ctx: CheckContext) -> list[Checkout]:
    """Source trees among `ctx.source_checkouts`, plus ./vllm-ascend and ./vllm under the current directory."""
    candidates = list(ctx.source_checkouts) + [Path.cwd() / "vllm-ascend", Path.cwd() / "vllm"]
    found: list[Checkout] = []
    for path in candidates:
        checkout = as_checkout(path)
        if checkout is not None and checkout not in found:
            found.append(checkout)
    return found


def _resolve_in_child(ctx: CheckContext, package: str) -> tuple[str | None, str]:
    """Where `package` resolves in a fresh interpreter with ctx.environ: (origin or None, error text)."""
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.find_spec({package!r})\n"
        "print(spec.origin if spec and spec.origin else (list(spec.submodule_search_locations)[0] "
        "if spec and spec.submodule_search_locations else ''))\n"
    )
    env = ctx.subprocess_env()
    env.pop("PYTHONSAFEPATH", None)
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=ctx.command_timeout_s,
            env=env,
            cwd="/",
        )
    except subprocess.TimeoutExpired:
        return None, "find_spec did not return in time"
    origin = done.stdout.strip()
    return (origin or None), done.stderr.strip()


def check_checkout(ctx: CheckContext, checkout: Checkout) -> CheckResult:
    name = f"build.checkout_{checkout.package}"
    expected = f"`import {checkout.package}` loads {checkout.path}"
    fix = (
        f"pip install -e {checkout.path} (for vllm: VLLM_TARGET_DEVICE=empty pip install -e {checkout.path}), "
        f"or export PYTHONPATH={checkout.path}:$PYTHONPATH"
    )
    origin, error = _resolve_in_child(ctx, checkout.package)
    if origin is None:
        why = f" ({error.splitlines()[-1]})" if error else ""
        return failed(name, G, f"checkout at {checkout.path} is not importable{why}", expected, fix)
    if not Path(origin).resolve().is_relative_to(checkout.path):
        return warned(
            name,
            G,
            f"`import {checkout.package}` loads {origin}, not the checkout at {checkout.path}",
            expected,
            f"edits in the checkout have no effect: pip uninstall {checkout.package.replace('_', '-')}, then {fix}",
        )
    return passed(name, G, f"`import {checkout.package}` loads {origin}", expected)


def check_build(ctx: CheckContext) -> list[CheckResult]:
    results = [check_cmake(ctx), check_gcc(ctx), check_pybind11()]
    for path in ctx.source_checkouts:
        if as_checkout(path) is None:
            results.append(
                failed(
                    "build.checkout",
                    G,
                    f"{path} is not a vllm / vllm-ascend checkout",
                    "a directory with setup.py or pyproject.toml and vllm_ascend/ (or vllm/)",
                    "pass the repository root you cloned (the directory holding setup.py)",
                )
            )
    checkouts = find_checkouts(ctx)
    if not checkouts and not ctx.source_checkouts:
        results.append(
            skipped(
                "build.checkout",
                G,
                "no vllm / vllm-ascend source checkout given (pass --source DIR, or run from the directory holding it)",
            )
        )
    results += [check_checkout(ctx, c) for c in checkouts]
    return results
