"""CANN: where the toolkit is, which version, whether its `set_env.sh` was sourced, and NNAL/ATB.

The classic day-one failure is a CANN that is installed but not sourced: torch_npu then dies with
"libascendcl.so: cannot open shared object file" (or a source build prints "Can not find CANN").
`set_env.sh` exports ASCEND_HOME_PATH / ASCEND_TOOLKIT_HOME and puts the toolkit's lib64 on
LD_LIBRARY_PATH, so "sourced" is checked by what the loader will actually see: a `libascendcl.so`
in one of the LD_LIBRARY_PATH directories.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from workbench.envcheck.context import CheckContext
from workbench.envcheck.infofiles import parse_version_cfg, read_key_values
from workbench.envcheck.presence import NpuPresence
from workbench.envcheck.result import CheckResult, Group, failed, passed, skipped, warned

G = Group.CANN
TOOLKIT_ENV_VARS = ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")
ATB_VERSION_KEY = "Ascend-cann-atb"  # in nnal/atb/<ver>/version.info: "Ascend-cann-atb : 8.2.RC1"
KERNELS_COMPONENT = "opp_kernel"  # the Ascend-cann-kernels-<soc> package installs as <toolkit>/opp_kernel


@dataclass(frozen=True)
class CannInstall:
    """What was found of the CANN toolkit. `toolkit` None = not found; `bad_env` lists variables
    that point at directories which do not exist (a stale set_env.sh from an uninstalled CANN)."""

    toolkit: Path | None
    found_via: str
    version: str | None = None
    version_source: Path | None = None
    component_versions: tuple[tuple[str, str], ...] = ()  # (component, version_dir) of each version.info
    set_env: Path | None = None
    bad_env: tuple[tuple[str, str], ...] = ()


def _toolkit_candidates(ctx: CheckContext) -> list[tuple[Path, str]]:
    candidates = [(Path(ctx.environ[v]), f"${v}") for v in TOOLKIT_ENV_VARS if ctx.environ.get(v)]
    root = ctx.ascend_root
    candidates.append((root / "ascend-toolkit" / "latest", "default location"))
    candidates.append((root / "cann", "default location (CANN 8.5+ layout)"))
    versioned = sorted(root.glob("cann-*"), key=lambda p: p.name, reverse=True) if root.is_dir() else []
    candidates += [(p, "default location (CANN 8.5+ layout)") for p in versioned]
    return candidates


def _release_name(text: str) -> str | None:
    """'8.2.RC1' or '9.1.0' from a directory name such as '8.2.RC1' or 'cann-9.1.0'."""
    name = text.removeprefix("cann-")
    try:
        Version(name)
    except InvalidVersion:
        return None
    return name


def toolkit_version(toolkit: Path) -> tuple[str | None, Path | None, tuple[tuple[str, str], ...]]:
    """Release name (e.g. '8.2.RC1'), the file it came from, and each component's version_dir.

    Order of trust: `<arch>-linux/ascend_toolkit_install.info` (what vllm-ascend's issue template asks
    for), then `version.cfg`, then a component `version.info`, then the resolved directory name.
    """
    components = []
    for info in sorted(toolkit.glob("*/version.info")):
        values = read_key_values(info) or {}
        if values.get("version_dir"):
            components.append((info.parent.name, values["version_dir"]))
    for info in sorted(toolkit.glob("*-linux/ascend_toolkit_install.info")):
        version = (read_key_values(info) or {}).get("version")
        if version:
            return version, info, tuple(components)
    cfg = toolkit / "version.cfg"
    if cfg.is_file():
        entries = parse_version_cfg(cfg.read_text(encoding="utf-8", errors="replace"))
        entry = entries.get("toolkit_running_version") or entries.get("runtime_running_version")
        if entry:
            return entry[1], cfg, tuple(components)
    if components:
        preferred = dict(components).get("toolkit") or dict(components).get("runtime") or components[0][1]
        return preferred, toolkit / "*/version.info", tuple(components)
    return _release_name(toolkit.resolve().name), None, tuple(components)


def find_cann(ctx: CheckContext) -> CannInstall:
    bad = tuple(
        (v, ctx.environ[v]) for v in TOOLKIT_ENV_VARS if ctx.environ.get(v) and not Path(ctx.environ[v]).is_dir()
    )
    for path, via in _toolkit_candidates(ctx):
        if path.is_dir():
            version, source, components = toolkit_version(path)
            set_env = next((p for p in (path / "set_env.sh", path.parent / "set_env.sh") if p.is_file()), None)
            return CannInstall(path, via, version, source, components, set_env, bad)
    return CannInstall(None, "", bad_env=bad)


def kernels_version(cann: CannInstall) -> str | None:
    """Release of the operator kernels package (e.g. '8.2.RC1'), None when it is not installed.

    From `<toolkit>/opp_kernel/version.info` (version_dir), else version.cfg's
    `opp_kernel_running_version=[inner:release]` (older layouts without per-component directories).
    """
    if cann.toolkit is None:
        return None
    found = dict(cann.component_versions).get(KERNELS_COMPONENT)
    if found:
        return found
    cfg = cann.toolkit / "version.cfg"
    if cfg.is_file():
        entry = parse_version_cfg(cfg.read_text(encoding="utf-8", errors="replace")).get(
            f"{KERNELS_COMPONENT}_running_version"
        )
        return entry[1] if entry else None
    return None


def nnal_atb_version(ctx: CheckContext) -> str | None:
    """NNAL/ATB release from `<root>/nnal/atb/<latest|ver>/version.info`, None when not installed."""
    info = _atb_version_file(ctx)
    return (read_key_values(info) or {}).get(ATB_VERSION_KEY) if info else None


@dataclass(frozen=True)
class DriverRequirements:
    """What the installed toolkit says about the driver under it, from its own version files.

    compatible_inner: driver inner-version families the toolkit lists (`compatible_version=[V100R001C18],...`
        in `<arch>-linux/ascend_toolkit_install.info`; the driver's `Innerversion` names its family);
    minimums: (component, version) pairs from `required_driver_<component>_version=` in the toolkit's
        component version.info files (e.g. runtime: ascendhal 4.0.0), to hold against the driver's
        `<component>_version`;
    sources: the files read. Empty fields: the toolkit's files do not say (older or partial layouts).
    """

    compatible_inner: tuple[str, ...] = ()
    minimums: tuple[tuple[str, str], ...] = ()
    sources: tuple[Path, ...] = ()


_REQUIRED_DRIVER = re.compile(r"^required_driver_(\w+)_version$")


def driver_requirements(cann: CannInstall) -> DriverRequirements:
    """Read what the toolkit demands of the driver (nothing when there is no toolkit)."""
    if cann.toolkit is None:
        return DriverRequirements()
    inner: list[str] = []
    minimums: dict[str, str] = {}
    sources: list[Path] = []
    for info in sorted(cann.toolkit.glob("*-linux/ascend_toolkit_install.info")):
        listed = re.findall(r"\[([^\]]+)\]", (read_key_values(info) or {}).get("compatible_version", ""))
        if listed:
            inner += [item.strip() for item in listed]
            sources.append(info)
    for info in sorted(cann.toolkit.glob("*/version.info")):
        found = {m.group(1): v for k, v in (read_key_values(info) or {}).items() if (m := _REQUIRED_DRIVER.match(k))}
        if found:
            minimums.update(found)
            sources.append(info)
    return DriverRequirements(tuple(dict.fromkeys(inner)), tuple(sorted(minimums.items())), tuple(sources))


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


def _atb_version_file(ctx: CheckContext) -> Path | None:
    atb = ctx.ascend_root / "nnal" / "atb"
    for candidate in [atb / "latest" / "version.info", *sorted(atb.glob("*/version.info"), reverse=True)]:
        if candidate.is_file():
            return candidate
    return None


def check_nnal(cann: CannInstall, presence: NpuPresence, ctx: CheckContext) -> CheckResult:
    """NNAL provides libatb.so; vllm-ascend needs it, and from the same release as CANN."""
    name = "cann.nnal_atb"
    info = _atb_version_file(ctx)
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
