"""The typed hand-offs of a scan: what a rule saw (`Hit`), what it means for the port (`CudaTie`), and what
could not be scanned (`ScanProblem`).

A rule only says *where* something CUDA-bound is and *which* rule saw it; what that means on Ascend (the
counterpart, the severity, the workbench step that verifies the change) is data in
`policy/scan/cuda-mapping.yaml`, joined in by `workbench.scan.mapping`. So rules stay small and the
porting knowledge stays reviewable, cited and in one table.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Severity(str, enum.Enum):
    """How much work a finding is on Ascend (docs/METHOD.md §1), worst last."""

    WORKS = "works"  # works as is under torch_npu.contrib.transfer_to_npu / vllm-ascend (verify it)
    CHANGE = "change"  # needs a change: the counterpart has another name, or the setting does nothing on Ascend
    BLOCKS = "blocks"  # no Ascend counterpart: a native fallback or a rewrite is needed
    UNKNOWN = "unknown"  # the scan could not decide (a value built at run time): read the line

    @property
    def meaning(self) -> str:
        return _MEANING[self]

    @property
    def rank(self) -> int:
        """Sort key, most work first: blocks, unknown, change, works."""
        return {Severity.BLOCKS: 0, Severity.UNKNOWN: 1, Severity.CHANGE: 2, Severity.WORKS: 3}[self]


_MEANING = {
    Severity.WORKS: "works as is under torch_npu.contrib.transfer_to_npu or vllm-ascend; run the verify step",
    Severity.CHANGE: "needs a change: the Ascend counterpart has another name, or the setting has no effect there",
    Severity.BLOCKS: "blocks the port: nothing on Ascend loads it; needs a native fallback or a rewrite",
    Severity.UNKNOWN: "undecided: the value is built at run time; read the line and decide",
}


class Category(str, enum.Enum):
    """What part of the service a finding ties to CUDA (the summary groups by these)."""

    TORCH_CUDA = "torch_cuda"
    DEVICE = "device"
    AMP = "amp"
    BACKENDS = "backends"
    CUDA_GRAPHS = "cuda_graphs"
    DISTRIBUTED = "distributed"
    EXTENSIONS = "extensions"
    TRITON = "triton"
    LIBRARIES = "libraries"
    DTYPES = "dtypes"
    VLLM_OPTIONS = "vllm_options"
    ENVIRONMENT = "environment"
    TOOLS = "tools"
    DEPENDENCIES = "dependencies"
    CONTAINERS = "containers"
    NATIVE_CODE = "native_code"
    UNRESOLVED = "unresolved"


class ProblemKind(str, enum.Enum):
    """Why a file (or directory) could not be scanned, or not completely."""

    SYNTAX_ERROR = "syntax_error"  # Python that does not parse: its findings are unknown
    BINARY = "binary"  # a text-kind file holding NUL bytes
    UNDECODABLE = "undecodable"  # not UTF-8: scanned with the bad bytes replaced
    UNREADABLE = "unreadable"  # permission denied or another OS error
    SYMLINK_LOOP = "symlink_loop"  # a link that leads back into its own ancestry
    BROKEN_SYMLINK = "broken_symlink"  # a link whose target does not exist
    TOO_LARGE = "too_large"  # over the size limit for its kind: not scanned
    MALFORMED = "malformed"  # parsed, but too deep or otherwise unusable (e.g. a recursion limit)
    INTERNAL_ERROR = "internal_error"  # a rule raised: a workbench bug, reported so the scan goes on


@dataclass(frozen=True)
class Hit:
    """One place a rule matched. `line`/`column` are 1-based; None where a position has no meaning
    (a compiled library). `detail` says what the rule resolved (an alias, a constant, a flag's value)."""

    file: str
    line: int | None
    column: int | None
    rule: str
    excerpt: str
    detail: str = ""


@dataclass(frozen=True)
class CudaTie:
    """A hit joined with its mapping row: what ties this line to CUDA and what replaces it on Ascend."""

    file: str
    line: int | None
    column: int | None
    rule: str
    category: Category
    excerpt: str
    counterpart: str
    severity: Severity
    verify: str
    detail: str = ""
    tier: str = "ships_with"  # where the file runs (workbench.scan.placement.Tier), engine first

    def as_row(self) -> dict[str, object]:
        """A flat record for tables, JSON and CSV (enums as their values)."""
        return {
            "tier": self.tier,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "rule": self.rule,
            "category": self.category.value,
            "severity": self.severity.value,
            "excerpt": self.excerpt,
            "detail": self.detail,
            "counterpart": self.counterpart,
            "verify": self.verify,
        }


@dataclass(frozen=True)
class ScanProblem:
    """A file or directory the scan could not (fully) read; the scan went on without it."""

    path: str
    kind: ProblemKind
    message: str
    line: int | None = None

    def as_row(self) -> dict[str, object]:
        return {"path": self.path, "kind": self.kind.value, "line": self.line, "message": self.message}


@dataclass(frozen=True)
class FileResult:
    """What scanning one file produced: its hits and its problems (either may be empty)."""

    path: str
    hits: tuple[Hit, ...] = ()
    problems: tuple[ScanProblem, ...] = ()
    scanned: bool = True
    tier: str = "ships_with"
