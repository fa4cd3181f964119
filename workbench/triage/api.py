"""The triage API: what `ascend-workbench triage` calls (and, through `workbench.serving.crash`, every verb
that starts a server).

    report = triage_paths(["server.log", "~/ascend/log/debug"], load_knowledge_base())
    print(render_text(report))
"""

from __future__ import annotations

from pathlib import Path

from workbench import settings
from workbench.triage.collect_env import CollectedEnv, looks_like_collect_env, parse_collect_env
from workbench.triage.diagnosis import Diagnosis, diagnose
from workbench.triage.kinds import FailureKind
from workbench.triage.knowledge import KnowledgeBase, load_knowledge_base
from workbench.triage.render import first_error_rows, render_text, report_dict, timeline_rows
from workbench.triage.report import ErrorEvent, TriageReport, triage_paths, triage_text

__all__ = [
    "CollectedEnv",
    "Diagnosis",
    "ErrorEvent",
    "FailureKind",
    "KnowledgeBase",
    "TriageReport",
    "diagnose",
    "example_logs",
    "first_error_rows",
    "load_knowledge_base",
    "looks_like_collect_env",
    "parse_collect_env",
    "render_text",
    "report_dict",
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
