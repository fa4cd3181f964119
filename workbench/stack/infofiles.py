"""Parsers for the small version files Ascend packages install, and Ascend version ordering.

Formats handled (samples in tests/fixtures/check/):
- `key=value` lines: CANN `ascend_toolkit_install.info` (version=8.2.RC1), component `version.info`
  (Version=8.2.0.0.201, version_dir=8.2.RC1), driver/firmware `version.info`
  (Version=25.0.rc1.1, compatible_version_fw=[7.0.0,7.7.99]);
- `key : value` lines with leading spaces: NNAL/ATB `version.info` (Ascend-cann-atb : 8.1.RC1);
- `version.cfg`: `toolkit_running_version=[7.7.0.1.238:8.1.RC1]` (inner version : release name).

Driver and firmware versions ("24.1.rc2.2", "25.0.rc1.1", "7.7.0.1.231") are not PEP 440, so they get
their own ordering: numbers compare as numbers and an `rcN` part sorts before any number at the same
position (24.1.rc2.2 < 24.1.0).
"""

from __future__ import annotations

import re
from pathlib import Path


def parse_key_values(text: str) -> dict[str, str]:
    """`key=value` or `key : value` lines -> dict (first separator wins; '#' comments skipped)."""
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        eq, colon = line.find("="), line.find(":")
        cut = eq if eq >= 0 and (colon < 0 or eq < colon) else colon
        if cut <= 0:
            continue
        values[line[:cut].strip()] = line[cut + 1 :].strip().strip('"')
    return values


def read_key_values(path: Path) -> dict[str, str] | None:
    """Parsed file, or None when it does not exist or cannot be read."""
    try:
        return parse_key_values(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


_CFG_ENTRY = re.compile(r"^\s*(\w+)=\[([^:\]]+):([^\]]+)\]\s*$")


def parse_version_cfg(text: str) -> dict[str, tuple[str, str]]:
    """`toolkit_running_version=[7.7.0.1.238:8.1.RC1]` -> {'toolkit_running_version': ('7.7.0.1.238', '8.1.RC1')}."""
    found = {}
    for line in text.splitlines():
        match = _CFG_ENTRY.match(line)
        if match:
            found[match.group(1)] = (match.group(2).strip(), match.group(3).strip())
    return found


def ascend_version_key(version: str) -> tuple[tuple[int, int], ...]:
    """Sort key for driver/firmware/npu-smi versions: '25.0.rc1.1' -> ((1,25),(1,0),(0,1),(1,1)).

    A number becomes (1, n) and `rcN` becomes (0, N), so a release candidate sorts before the final
    release at the same position. Unknown words sort like rc 0.
    """
    key = []
    for part in re.split(r"[.\-]", version.strip().lower()):
        if part.isdigit():
            key.append((1, int(part)))
        elif part:
            digits = re.sub(r"\D", "", part)
            key.append((0, int(digits) if digits else 0))
    return tuple(key)


def parse_range(text: str) -> tuple[str, str] | None:
    """'[7.0.0,7.7.99]' -> ('7.0.0', '7.7.99'); None when not a two-item bracket."""
    match = re.fullmatch(r"\s*\[\s*([^,\]]+)\s*,\s*([^,\]]+)\s*\]\s*", text or "")
    return (match.group(1), match.group(2)) if match else None


def in_range(version: str, bounds: tuple[str, str]) -> bool:
    low, high = (ascend_version_key(b) for b in bounds)
    return low <= ascend_version_key(version) <= high
