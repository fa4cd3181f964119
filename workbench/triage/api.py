"""The triage API: what `ascend-workbench triage` calls (and, through `workbench.serving.crash`, every verb
that starts a server).

    report = triage_paths(["server.log", "~/ascend/log/debug"], load_knowledge_base())
    print(render_text(report))
"""

from __future__ import annotations

from workbench.triage.collect_env import CollectedEnv, looks_like_collect_env, parse_collect_env
from workbench.triage.diagnosis import Diagnosis, diagnose
from workbench.triage.kinds import FailureKind
from workbench.triage.knowledge import KnowledgeBase, load_knowledge_base
from workbench.triage.render import render_text, report_dict
from workbench.triage.report import ErrorEvent, TriageReport, triage_paths, triage_text

__all__ = [
    "CollectedEnv",
    "Diagnosis",
    "ErrorEvent",
    "FailureKind",
    "KnowledgeBase",
    "TriageReport",
    "diagnose",
    "load_knowledge_base",
    "looks_like_collect_env",
    "parse_collect_env",
    "render_text",
    "report_dict",
    "triage_paths",
    "triage_text",
]
