"""The triage API: one use case for `ascend-workbench triage` and the notebooks (and, through
`workbench.serving.crash`, every verb that starts a server).

    result = run_triage(TriageRequest(paths=("server.log", "~/ascend/log/debug")))
    print(result.text())              # the first failing rank, operator and code, cause, fix, verify step
    result.write("triage.json")       # a typed document (kind "triage")
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench import settings
from workbench.errors import WorkbenchError
from workbench.results.envelope import DocumentKind, write_result
from workbench.triage.collect_env import CollectedEnv, looks_like_collect_env, parse_collect_env
from workbench.triage.diagnosis import Diagnosis, diagnose
from workbench.triage.kinds import FailureKind
from workbench.triage.knowledge import KnowledgeBase, load_knowledge_base
from workbench.triage.render import first_error_rows, render_text, report_dict, timeline_rows
from workbench.triage.report import ErrorEvent, TriageReport, triage_paths, triage_text

__all__ = [
    "TRIAGE_KIND",
    "CollectedEnv",
    "Diagnosis",
    "ErrorEvent",
    "FailureKind",
    "KnowledgeBase",
    "TriageReport",
    "TriageRequest",
    "TriageResult",
    "diagnose",
    "example_logs",
    "first_error_rows",
    "load_knowledge_base",
    "looks_like_collect_env",
    "parse_collect_env",
    "render_text",
    "report_dict",
    "run_triage",
    "triage_paths",
    "timeline_rows",
    "triage_text",
]

# A real crash, as its author posted it (vllm-ascend issue #1972, Llama-4-Scout at TP=8): one rank's
# vector-core exception, then the engine's 507034 ten seconds later. The corpus and where each of its
# logs came from: tests/fixtures/triage/SOURCES.md.
EXAMPLE_LOGS = ("va1972_507034_ez9999_aivec_llama4.log",)


def example_logs() -> list[Path]:
    """The real logs notebook 03 triages when it is given none of its own."""
    return [settings.REPO_ROOT / "tests" / "fixtures" / "triage" / name for name in EXAMPLE_LOGS]


# The triage's result document. Version 1: inputs, problems, knowledge base, first error, every event, stacks.
TRIAGE_KIND = DocumentKind("triage", 1)


@dataclass(frozen=True)
class TriageRequest:
    """Which logs to triage, against which knowledge base. Checked once, here."""

    paths: tuple[Path, ...]  # log files and directories (walked)
    codes: Path | None = None  # the knowledge base (default policy/triage/error_codes.yaml)

    def __post_init__(self) -> None:
        if not self.paths:
            raise WorkbenchError("give log files or a directory of logs to triage")
        object.__setattr__(self, "paths", tuple(Path(p).expanduser() for p in self.paths))
        if self.codes is not None and not Path(self.codes).is_file():
            raise WorkbenchError(f"--codes {self.codes}: no such knowledge-base file; the shipped one is the default")


@dataclass(frozen=True)
class TriageResult:
    request: TriageRequest
    report: TriageReport

    @property
    def exit_code(self) -> int:
        """0: the triage ran (the errors found are its answer, not a failure)."""
        return 0

    def to_dict(self) -> dict[str, Any]:
        return report_dict(self.report)

    def write(self, path: str | Path) -> Path:
        from workbench.stack.provenance import provenance

        return write_result(Path(path), self.to_dict(), provenance(), TRIAGE_KIND)

    def text(self) -> str:
        return render_text(self.report)


def run_triage(request: TriageRequest) -> TriageResult:
    """Triage the request's logs; nothing readable among them is one error naming each path and why."""
    report = triage_paths(request.paths, load_knowledge_base(request.codes))
    if not report.inputs:
        reasons = "; ".join(f"{p.path}: {p.reason}" for p in report.problems)
        raise WorkbenchError(f"nothing to triage ({reasons}); give log files or a directory of logs")
    return TriageResult(request, report)
