"""The kernel rules as data: `policy/profiling/kernel_rules.yaml` (msprof-analyze's advisor thresholds, each cited),
and the chip's core counts the block-dim rule needs. Read by `kernel_verdicts`."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from workbench.recipes import Frozen, load_recipe_file
from workbench.settings import policy_dir


class _Cube(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    mac_bound: float
    mte2_bound: float
    memory_mb: float
    inner_axis: int
    source: str


class _Vector(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    total_bound: float
    mte2_bound: float
    mte3_bound: float
    vec_bound: float
    source: str


class KernelRules(Frozen):
    """policy/profiling/kernel_rules.yaml (see its comments)."""

    name: str
    description: str = ""
    hot_share: float = Field(0.01, ge=0, lt=1)
    cube: _Cube
    vector: _Vector
    pipe_bound: float
    pipe_source: str
    aicpu_min_us: float
    aicpu_source: str
    block_dim_source: str
    format_patterns: tuple[str, ...]
    copy_patterns: tuple[str, ...]
    format_source: str
    aclnn: dict[str, tuple[str, ...]]
    aclnn_source: str
    source: Path | None = Field(None, exclude=True)


@functools.cache
def load_kernel_rules(path: Path | None = None) -> KernelRules:
    return load_recipe_file(KernelRules, path or policy_dir() / "profiling" / "kernel_rules.yaml", what="kernel rules")


@dataclass(frozen=True)
class CoreCounts:
    """The chip's AI cores (cube) and vector cores: msprof's info.json `ai_core_num` / `aiv_num`."""

    cube: int
    vector: int | None = None

    def for_core(self, core: str) -> int:
        return self.cube if core == "AI_CORE" or self.vector is None else self.vector


__all__ = ["CoreCounts", "KernelRules", "load_kernel_rules"]
