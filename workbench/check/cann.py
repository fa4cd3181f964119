"""CANN: where the toolkit is, which version, whether its `set_env.sh` was sourced, and NNAL/ATB.

The classic day-one failure is a CANN that is installed but not sourced: torch_npu then dies with
"libascendcl.so: cannot open shared object file" (or a source build prints "Can not find CANN").
`set_env.sh` exports ASCEND_HOME_PATH / ASCEND_TOOLKIT_HOME and puts the toolkit's lib64 on
LD_LIBRARY_PATH, so "sourced" is checked by what the loader will actually see: a `libascendcl.so`
in one of the LD_LIBRARY_PATH directories.
"""

from __future__ import annotations

from pathlib import Path

from packaging.version import InvalidVersion, Version

from workbench.check.context import CheckContext
from workbench.check.result import CheckResult, Group, failed, passed, skipped, warned
from workbench.stack.cann import ATB_VERSION_KEY, TOOLKIT_ENV_VARS, CannInstall, atb_version_file
from workbench.stack.infofiles import read_key_values
from workbench.stack.presence import NpuPresence

G = Group.CANN


def check_toolkit(cann: CannInstall, presence: NpuPresence, ctx: CheckContext) -> CheckResult:
    name = "cann.toolkit"
    if cann.bad_env:
        stale = ", ".join(f"{var}={value}" for var, value in cann.bad_env)
        return failed(
            name,
            G,
            f"{stale} does not exist",
            "the variables point at an installed toolkit",
            "open a new shell and source the set_env.sh of the CANN you have installed "
            f"(e.g. {ctx.ascend_root}/ascend-toolkit/set_env.sh); remove old `source` lines from ~/.bashrc",
        )
    if cann.toolkit is None:
        looked = (
            f"$ASCEND_HOME_PATH, $ASCEND_TOOLKIT_HOME, {ctx.ascend_root}/ascend-toolkit/latest, {ctx.ascend_root}/cann*"
        )
        if not presence.present:
            return skipped(name, G, f"no CANN toolkit ({looked}): {presence.evidence}")
        return failed(
            name,
            G,
            f"no CANN toolkit found in {looked}",
            "CANN toolkit of your matrix row",
            "install the CANN toolkit (Ascend-cann-toolkit_<version>_linux-<arch>.run --full) or set "
            "ASCEND_WORKBENCH_ASCEND_ROOT / --ascend-root to where it is installed",
        )
    return passed(name, G, f"{cann.toolkit} (via {cann.found_via})")


def check_version(cann: CannInstall) -> CheckResult:
    name = "cann.version"
    if cann.toolkit is None:
        return skipped(name, G, "no CANN toolkit")
    if cann.version is None:
        return warned(
            name,
            G,
            f"no version file under {cann.toolkit}",
            "<arch>-linux/ascend_toolkit_install.info",
            "reinstall the toolkit: its install info files are missing",
        )
    mixed = sorted({v for _, v in cann.component_versions})
    observed = f"CANN {cann.version} (from {cann.version_source})"
    if len(mixed) > 1:
        parts = ", ".join(f"{c} {v}" for c, v in cann.component_versions)
        return failed(
            name,
            G,
            f"{observed}; components disagree: {parts}",
            "one CANN release in every component",
            f"reinstall every CANN package (toolkit, kernels/ops, NNAL) from the same release, e.g. {cann.version}",
        )
    return passed(name, G, observed)


def _libascendcl_dirs(ctx: CheckContext) -> list[str]:
    dirs = [d for d in ctx.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    return [d for d in dirs if (Path(d) / "libascendcl.so").exists()]


def check_sourced(cann: CannInstall, ctx: CheckContext) -> CheckResult:
    name = "cann.set_env"
    if cann.toolkit is None:
        return skipped(name, G, "no CANN toolkit")
    script = cann.set_env or cann.toolkit.parent / "set_env.sh"
    lib_dirs = _libascendcl_dirs(ctx)
    home = next((f"{v}={ctx.environ[v]}" for v in TOOLKIT_ENV_VARS if ctx.environ.get(v)), None)
    expected = "libascendcl.so on LD_LIBRARY_PATH and ASCEND_HOME_PATH set"
    if lib_dirs and home:
        return passed(name, G, f"{home}; libascendcl.so in {lib_dirs[0]}", expected)
    missing = []
    if not home:
        missing.append("ASCEND_HOME_PATH/ASCEND_TOOLKIT_HOME unset")
    if not lib_dirs:
        missing.append("no libascendcl.so on LD_LIBRARY_PATH")
    return failed(
        name,
        G,
        f"set_env.sh not sourced: {', '.join(missing)}",
        expected,
        f"source {script} in the shell (and in the container entrypoint) that starts Python; without it "
        "torch_npu fails with 'libascendcl.so: cannot open shared object file' and builds say 'Can not find CANN'",
    )


def check_nnal(cann: CannInstall, presence: NpuPresence, ctx: CheckContext) -> CheckResult:
    """NNAL provides libatb.so; vllm-ascend needs it, and from the same release as CANN."""
    name = "cann.nnal_atb"
    info = atb_version_file(ctx)
    if info is None:
        if not presence.present:
            return skipped(name, G, f"NNAL/ATB not installed: {presence.evidence}")
        return failed(
            name,
            G,
            f"no NNAL/ATB under {ctx.ascend_root / 'nnal' / 'atb'}",
            "NNAL of the CANN release",
            "install Ascend-cann-nnal_<CANN version>_linux-<arch>.run and source "
            f"{ctx.ascend_root}/nnal/atb/set_env.sh (vllm-ascend needs libatb.so)",
        )
    values = read_key_values(info) or {}
    version = values.get(ATB_VERSION_KEY)
    observed = f"ATB {version or '?'} ({info})"
    if version and cann.version and not _same_release(version, cann.version):
        return failed(
            name,
            G,
            f"{observed} with CANN {cann.version}",
            f"ATB {cann.version}",
            f"install NNAL {cann.version} (a mismatched ATB shows up as 'undefined symbol: _ZN...atb' "
            "when torch_npu imports)",
        )
    if not ctx.environ.get("ATB_HOME_PATH"):
        return warned(
            name,
            G,
            f"{observed}; ATB_HOME_PATH unset",
            "NNAL set_env.sh sourced",
            f"source {ctx.ascend_root}/nnal/atb/set_env.sh",
        )
    return passed(name, G, f"{observed}; ATB_HOME_PATH={ctx.environ['ATB_HOME_PATH']}")


def _same_release(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a.lower() == b.lower()


def check_cann(cann: CannInstall, presence: NpuPresence, ctx: CheckContext) -> list[CheckResult]:
    return [
        check_toolkit(cann, presence, ctx),
        check_version(cann),
        check_sourced(cann, ctx),
        check_nnal(cann, presence, ctx),
    ]
