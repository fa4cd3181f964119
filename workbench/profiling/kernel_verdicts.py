"""Kernel verdicts from Ascend's own counters: which pipeline each hot kernel saturates, and what to do about it.

torch_npu's `kernel_details.csv` and msprof's `op_summary_*.csv` carry, per device task, the share of its
time each pipeline was busy (`aic_mac_ratio` for the cube unit, `aiv_vec_ratio` for the vector unit,
`*_scalar_ratio`, `*_mte2_ratio` for loads from global memory, `*_mte3_ratio` for stores), its block dim,
its core type and its input shapes. Kernels are grouped by type, core and shapes (as msprof-analyze's
advisor groups them: op name and shape), the groups holding at least `hot_share` of the device time are
judged with the advisor's rules (`policy/profiling/kernel_rules.yaml`, each rule cited), and every verdict
carries the counter, its value, the threshold and the source:

    cube-bound / memory-bound (MTE2)   cube tasks: aic_mac_ratio, aic_mte2_ratio; no bound: the room left
    vector / memory / store-bound      vector tasks: their total, then MTE2, MTE3, vec
    scalar-bound (or another pipe)     any task: a pipe ratio above operator_bound_ratio
    AI CPU fallback                    an AI_CPU task above the advisor's 20 µs
    low block dim                      block dim not a multiple of the core count (when the count is known)
    unaligned shapes                   a large cube task whose inner axes are not multiples of 256
    format conversion / H2D copy       framework work, counted as its own bucket

A group is then joined to the kernel table (`ascend_backend.platform.kernels`): the torch_npu call whose aclnn
kernel it is, the registry op, and the vllm-ascend code path (file@tag:line) of every table row that makes
that call — what the table says should run, for each release.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from workbench.errors import WorkbenchError
from workbench.profiling.ascend_csv import MISSING, read_columns
from workbench.profiling.kernel_rules import CoreCounts, KernelRules, load_kernel_rules

CUBE_RATIOS = ("aic_mac_ratio", "aic_scalar_ratio", "aic_mte1_ratio", "aic_mte2_ratio", "aic_fixpipe_ratio")
VECTOR_RATIOS = ("aiv_vec_ratio", "aiv_scalar_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio")
RATIOS = CUBE_RATIOS + VECTOR_RATIOS
COLUMNS = {
    "name": ("Name", "Op Name"),
    "type": ("Type", "OP Type"),
    "core": ("Accelerator Core", "Task Type"),
    "duration": ("Duration(us)", "Task Duration(us)"),
    "block": ("Block Dim", "Block Num"),
    "mix_block": ("Mix Block Dim", "Mix Block Num"),
    "shapes": ("Input Shapes",),
    "dtypes": ("Input Data Types",),
    **{ratio: (ratio,) for ratio in RATIOS},
}
CUBE_CORES = ("AI_CORE", "MIX_AIC")
VECTOR_CORES = ("AI_VECTOR_CORE", "MIX_AIV")
BLOCK_CORES = ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC")


class KernelFinding(str, enum.Enum):
    CUBE_BOUND = "cube-bound"
    VECTOR_BOUND = "vector-bound"
    SCALAR_BOUND = "scalar-bound"
    MEMORY_BOUND = "memory-bound (MTE2)"
    STORE_BOUND = "store-bound (MTE3)"
    PIPES_SATURATED = "vector and memory pipes saturated"
    NO_BOUND = "no pipeline bound"
    AI_CPU = "AI CPU fallback"
    LOW_BLOCK_DIM = "low block dim"
    UNALIGNED = "unaligned shapes"
    FORMAT = "format conversion"
    H2D_COPY = "host-to-device copy"


@dataclass(frozen=True)
class Evidence:
    finding: KernelFinding
    counter: str  # what was compared, e.g. 'aic_mac_ratio 0.820 >= 0.8'
    source: str

    def text(self) -> str:
        return f"{self.finding.value}: {self.counter} [{self.source}]"


@dataclass(frozen=True)
class KernelVerdict:
    """One hot kernel group (type, core, shapes) and everything its counters say."""

    kernel: str  # the task type (or the name's stem when the type column is empty)
    name: str  # one task's full name, e.g. aclnnMatmul_MatMulV3Common_MatMulV3
    core: str
    shapes: str
    calls: int
    total_us: float
    share: float  # of the device time in the file
    ratios: dict[str, float]  # the group's mean of each counter present
    evidence: tuple[Evidence, ...]
    table_rows: tuple[str, ...] = field(default=())  # kernel-table rows making this call (id: op, where, file@tag:line)

    @property
    def findings(self) -> tuple[KernelFinding, ...]:
        return tuple(e.finding for e in self.evidence)

    def row(self) -> dict[str, object]:
        return {
            "kernel": self.kernel,
            "core": self.core,
            "shapes": self.shapes,
            "calls": self.calls,
            "total_ms": self.total_us / 1000.0,
            "share": self.share,
            "verdicts": "; ".join(e.finding.value for e in self.evidence) or "-",
            "evidence": "; ".join(e.counter for e in self.evidence),
            "kernel table": "; ".join(self.table_rows) or "-",
        }


def read_counters(path: Path) -> pd.DataFrame:
    """A kernel_details.csv / op_summary_*.csv as canonical columns (see COLUMNS), rows without a duration dropped."""
    frame = read_columns(
        Path(path), COLUMNS, required=("name", "duration"), numeric=("duration", "block", "mix_block", *RATIOS)
    )
    frame = frame.dropna(subset=["duration"]).copy()
    stem = frame["name"].str.replace(r"(_\d+)+$", "", regex=True)
    typed = frame["type"] if "type" in frame else pd.Series("", index=frame.index)
    written = typed.fillna("").str.strip()
    frame["kernel"] = written.where(~written.isin(MISSING), stem)
    frame["core"] = _cores(frame)
    for column in ("shapes", "dtypes"):
        frame[column] = frame[column].fillna("").str.strip('"') if column in frame else ""
    return frame


def _cores(frame: pd.DataFrame) -> pd.Series:
    """The core column as written; when empty (msprof's unit-test rows), inferred from which counters are there."""
    core = frame["core"].fillna("").str.upper() if "core" in frame else pd.Series("", index=frame.index)
    cube = frame[[r for r in RATIOS if r.startswith("aic_") and r in frame]].fillna(0).sum(axis=1) > 0
    vector = frame[[r for r in RATIOS if r.startswith("aiv_") and r in frame]].fillna(0).sum(axis=1) > 0
    guessed = np.where(
        cube & vector, "MIX_AIC", np.where(cube, "AI_CORE", np.where(vector, "AI_VECTOR_CORE", "UNKNOWN"))
    )
    return core.where(core.isin(["", "N/A"]) == False, pd.Series(guessed, index=frame.index))  # noqa: E712


def _ge(name: str, value: float, limit: float) -> str:
    return f"{name} {value:.3f} >= {limit:g}"


def _cube(ratios: dict[str, float], rules: KernelRules) -> list[Evidence]:
    c = rules.cube
    mac, mte2 = ratios.get("aic_mac_ratio"), ratios.get("aic_mte2_ratio")
    if mac is None or mte2 is None:
        return []
    found = []
    if mac >= c.mac_bound:
        found.append(Evidence(KernelFinding.CUBE_BOUND, _ge("aic_mac_ratio", mac, c.mac_bound), c.source))
    if mte2 >= c.mte2_bound:
        found.append(Evidence(KernelFinding.MEMORY_BOUND, _ge("aic_mte2_ratio", mte2, c.mte2_bound), c.source))
    if not found:
        room = max(c.mac_bound - mac, c.mte2_bound - mte2)
        said = (
            f"aic_mac_ratio {mac:.3f} < {c.mac_bound:g}, aic_mte2_ratio {mte2:.3f} < {c.mte2_bound:g}: room {room:.0%}"
        )
        found.append(Evidence(KernelFinding.NO_BOUND, said, c.source))
    return found


def _vector(ratios: dict[str, float], rules: KernelRules) -> list[Evidence]:
    v = rules.vector
    vec, mte2, mte3 = (ratios.get(k) for k in ("aiv_vec_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio"))
    if vec is None or mte2 is None or mte3 is None:
        return []
    if vec + mte2 + mte3 >= v.total_bound:
        leading = max((("aiv_vec_ratio", vec), ("aiv_mte2_ratio", mte2), ("aiv_mte3_ratio", mte3)), key=lambda p: p[1])
        said = (
            f"vec + mte2 + mte3 {vec + mte2 + mte3:.3f} >= {v.total_bound:g} ({leading[0]} leads at {leading[1]:.3f})"
        )
        return [Evidence(KernelFinding.PIPES_SATURATED, said, v.source)]
    ordered = (  # the advisor's order after the total: MTE2, MTE3, vec
        (KernelFinding.MEMORY_BOUND, "aiv_mte2_ratio", mte2, v.mte2_bound),
        (KernelFinding.STORE_BOUND, "aiv_mte3_ratio", mte3, v.mte3_bound),
        (KernelFinding.VECTOR_BOUND, "aiv_vec_ratio", vec, v.vec_bound),
    )
    for finding, name, value, limit in ordered:
        if value >= limit:
            return [Evidence(finding, _ge(name, value, limit), v.source)]
    room = max(v.vec_bound - vec, v.mte2_bound - mte2, v.mte3_bound - mte3)
    said = f"no vector pipe at its limit (vec {vec:.3f}, mte2 {mte2:.3f}, mte3 {mte3:.3f}): room {room:.0%}"
    return [Evidence(KernelFinding.NO_BOUND, said, v.source)]


PIPE_FINDINGS = {
    "scalar": KernelFinding.SCALAR_BOUND,
    "mac": KernelFinding.CUBE_BOUND,
    "vec": KernelFinding.VECTOR_BOUND,
    "mte2": KernelFinding.MEMORY_BOUND,
    "mte3": KernelFinding.STORE_BOUND,
}


def _pipes(ratios: dict[str, float], rules: KernelRules, only_scalar: bool) -> list[Evidence]:
    """The operator-bound rule: a pipe above `pipe_bound` bounds the kernel; none above it: no bound.

    A cube or vector task already judged by its own (stricter) rule is only checked for its scalar pipe, which
    those rules do not look at."""
    found: list[Evidence] = []
    for name, value in sorted(ratios.items(), key=lambda p: -p[1]):
        finding = PIPE_FINDINGS.get(name.split("_")[1])
        if finding is None or value <= rules.pipe_bound or (only_scalar and finding is not KernelFinding.SCALAR_BOUND):
            continue
        if finding not in {e.finding for e in found}:
            found.append(Evidence(finding, f"{name} {value:.3f} > {rules.pipe_bound:g}", rules.pipe_source))
    if not found and ratios and not only_scalar:
        busiest = max(ratios.items(), key=lambda p: p[1])
        said = f"no pipe above {rules.pipe_bound:g} (busiest {busiest[0]} {busiest[1]:.3f})"
        found.append(Evidence(KernelFinding.NO_BOUND, said, rules.pipe_source))
    return found


def _memory_mb(shapes: str) -> float:
    """The advisor's memory_size of a task's input shapes (2 bytes an element; a 1-d entry counted twice)."""
    total = 0
    for part in shapes.split(";"):
        dims = [int(d) for d in part.split(",") if d.strip().isdigit()]
        total += (dims[0] * 2 if len(dims) == 1 else int(np.prod(dims))) if dims else 0
    return total * 2 / 1024 / 1024


def _aligned(shapes: str, axis: int) -> bool | None:
    """The advisor's inner-axis check for an ND matmul: the last axis of both inputs divisible by `axis`."""
    parts = [p for p in shapes.split(";") if p]
    if len(parts) < 2:
        return None
    first, second = parts[0].split(","), parts[1].split(",")
    if len(first) != 2 or not first[-1].strip().isdigit() or not second[-1].strip().isdigit():
        return None
    return int(first[-1]) % axis == 0 and int(second[-1]) % axis == 0


def _framework(kernel: str, name: str, rules: KernelRules) -> list[Evidence]:
    text = f"{kernel} {name}"
    if any(re.search(p, kernel) or re.search(p, name) for p in rules.copy_patterns):
        return [Evidence(KernelFinding.H2D_COPY, f"{name}: a host-to-device copy", rules.format_source)]
    if any(re.search(p, kernel) or re.search(p, name) for p in rules.format_patterns):
        return [Evidence(KernelFinding.FORMAT, f"{text.strip()}: a layout conversion", rules.format_source)]
    return []


def _block_dim(core: str, block: float, cores: CoreCounts | None, rules: KernelRules) -> list[Evidence]:
    if cores is None or core not in BLOCK_CORES or not block or block != block:
        return []
    count = cores.for_core(core)
    if int(block) % count == 0:
        return []
    kind = "AI cores" if count == cores.cube else "vector cores"
    said = f"block dim {int(block)} is not a multiple of the {count} {kind}: the last wave leaves cores idle"
    return [Evidence(KernelFinding.LOW_BLOCK_DIM, said, rules.block_dim_source)]


def judge_group(group: pd.DataFrame, rules: KernelRules, cores: CoreCounts | None) -> list[Evidence]:
    """Every verdict of one kernel group (its rows share type, core and shapes)."""
    first = group.iloc[0]
    kernel, core, shapes = str(first["kernel"]), str(first["core"]), str(first["shapes"])
    ratios = {r: float(group[r].mean()) for r in RATIOS if r in group and group[r].notna().any()}
    found = _framework(kernel, str(first["name"]), rules)
    if core == "AI_CPU" and group["duration"].max() > rules.aicpu_min_us:
        said = f"AI_CPU task of {group['duration'].max():.1f} us > {rules.aicpu_min_us:g} us"
        found.append(Evidence(KernelFinding.AI_CPU, said, rules.aicpu_source))
    judged: list[Evidence] = []
    if core in CUBE_CORES and "matmul" in kernel.lower():
        if _memory_mb(shapes) >= rules.cube.memory_mb and _aligned(shapes, rules.cube.inner_axis) is False:
            said = f"inner axes of {shapes} not multiples of {rules.cube.inner_axis}"
            found.append(Evidence(KernelFinding.UNALIGNED, said, rules.cube.source))
        judged = _cube(ratios, rules)
    elif core in VECTOR_CORES:
        judged = _vector(ratios, rules)
    found += judged + _pipes(ratios, rules, only_scalar=bool(judged))
    block = group["block"].mode().iloc[0] if "block" in group and group["block"].notna().any() else None
    found += _block_dim(core, block, cores, rules) if block is not None else []
    return found


def judge_kernels(
    path: Path | str, cores: CoreCounts | None = None, rules: KernelRules | None = None
) -> list[KernelVerdict]:
    """The hot kernel groups of a kernel_details.csv / op_summary_*.csv, judged, hottest first."""
    rules = rules or load_kernel_rules()
    frame = read_counters(Path(path))
    frame = frame[frame["core"] != "HCCL"]  # communication is judged by the step shares, not by pipelines
    total = float(frame["duration"].sum())
    if frame.empty or total <= 0:
        raise WorkbenchError(f"{path}: no device task with a duration; nothing to judge")
    verdicts = []
    for (kernel, core, shapes), group in frame.groupby(["kernel", "core", "shapes"], sort=False):
        share = float(group["duration"].sum()) / total
        if share < rules.hot_share:
            continue
        ratios = {r: float(group[r].mean()) for r in RATIOS if r in group and group[r].notna().any()}
        verdict = KernelVerdict(
            kernel=str(kernel),
            name=str(group["name"].iloc[0]),
            core=str(core),
            shapes=str(shapes),
            calls=len(group),
            total_us=float(group["duration"].sum()),
            share=share,
            ratios=ratios,
            evidence=tuple(judge_group(group, rules, cores)),
            table_rows=table_rows(str(group["name"].iloc[0]), str(kernel), rules),
        )
        verdicts.append(verdict)
    return sorted(verdicts, key=lambda v: -v.total_us)


def table_rows(name: str, kernel: str, rules: KernelRules) -> tuple[str, ...]:
    """The kernel-table rows whose torch_npu call launches this kernel (its aclnn name or its type)."""
    from ascend_backend.platform.kernels import kernel_table

    launched = name.split("_", 1)[0].removeprefix("aclnn")
    calls = {call for call, kinds in rules.aclnn.items() if launched in kinds or kernel in kinds}
    rows = [r for r in kernel_table() if any(call in r.kernel.split(" + ") for call in calls)]
    return tuple(f"{r.id}: {r.op} ({r.kernel}, {_releases(r)}) at {r.source}@{r.tag}:{r.line or '?'}" for r in rows)


def _releases(row) -> str:
    """'v0.11.0 to v0.13.0' or 'v0.9.2rc1 on': the vllm-ascend releases a kernel-table row holds for."""
    return ", ".join(f"v{low} to v{high}" if high else f"v{low} on" for low, high in row.releases)


def verdicts_frame(verdicts: list[KernelVerdict]) -> pd.DataFrame:
    columns = ["kernel", "core", "shapes", "calls", "total_ms", "share", "verdicts", "evidence", "kernel table"]
    return pd.DataFrame([v.row() for v in verdicts], columns=columns)


def framework_bucket(verdicts: list[KernelVerdict]) -> dict[str, float]:
    """Device time (µs) of the format conversions and host-to-device copies among the judged groups."""
    totals = {KernelFinding.FORMAT.value: 0.0, KernelFinding.H2D_COPY.value: 0.0}
    for verdict in verdicts:
        for finding in (KernelFinding.FORMAT, KernelFinding.H2D_COPY):
            if finding in verdict.findings:
                totals[finding.value] += verdict.total_us
    return totals


__all__ = [
    "CoreCounts",
    "Evidence",
    "KernelFinding",
    "KernelRules",
    "KernelVerdict",
    "framework_bucket",
    "judge_kernels",
    "load_kernel_rules",
    "read_counters",
    "table_rows",
    "verdicts_frame",
]
