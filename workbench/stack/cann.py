"""The CANN toolkit on this machine: where it is, which release, its kernels and NNAL/ATB packages, and
what it requires of the driver under it — read from its own version files, never by importing anything.

`set_env.sh` exports ASCEND_HOME_PATH / ASCEND_TOOLKIT_HOME; the toolkit is looked for there first,
then at the default locations (`<root>/ascend-toolkit/latest`, and `<root>/cann[-<ver>]` from CANN 8.5).
The pre-flight judges these readings (`workbench.check.cann`); the stack fingerprint records them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from workbench.stack.context import MachineContext
from workbench.stack.infofiles import parse_version_cfg, read_key_values

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


def _toolkit_candidates(ctx: MachineContext) -> list[tuple[Path, str]]:
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


def find_cann(ctx: MachineContext) -> CannInstall:
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


def nnal_atb_version(ctx: MachineContext) -> str | None:
    """NNAL/ATB release from `<root>/nnal/atb/<latest|ver>/version.info`, None when not installed."""
    info = atb_version_file(ctx)
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


def atb_version_file(ctx: MachineContext) -> Path | None:
    """NNAL/ATB's version.info (`latest`, else the newest version directory), None when not installed."""
    atb = ctx.ascend_root / "nnal" / "atb"
    for candidate in [atb / "latest" / "version.info", *sorted(atb.glob("*/version.info"), reverse=True)]:
        if candidate.is_file():
            return candidate
    return None
