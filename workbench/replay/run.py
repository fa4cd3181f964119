"""The replay use case: send a trace to a service (a URL, or a recipe launched for the run), judge every answer.

    result = run_replay(ReplayRequest(Path("runs/capture/prod"), recipe=load_serving_recipe("npu.yaml")))
    print(result.text()); result.parity_table(); result.latency_table()

Order of work, each step saved before the next: `plan.json` (a rerun with the same --out resumes and refuses
another plan); phase 1, the timed replay (`requests.jsonl`, a line per answer); phase 2, the scores of the
sampled requests (`scores.jsonl`); then the judgement, `replay.json`. A killed replay resumes where it stopped.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from workbench.errors import WorkbenchError
from workbench.recipes import ServingRecipe
from workbench.replay.fidelity import timing_fidelity
from workbench.replay.latency import attainment, latency_rows
from workbench.replay.parity import Parity, Tolerances, judge_all
from workbench.replay.policy import ReplayThresholds, load_thresholds
from workbench.replay.report import ReplayResult, judge_replay, read_replay
from workbench.replay.schedule import plan
from workbench.replay.send import score_all, send_all
from workbench.replay.store import (
    check_plan,
    file_digest,
    read_lines,
    read_scores,
    requests_log,
    scores_log,
)
from workbench.results.jsonl import JsonlLog
from workbench.serving.guard import GuardSummary, check_output
from workbench.serving.load.runner import run_coroutine
from workbench.serving.load.trace import TraceRecord, read_trace, trace_path
from workbench.serving.server import connect
from workbench.settings import run_dir
from workbench.stack.provenance import provenance


@dataclass(frozen=True)
class ReplayRequest:
    """`replay TRACE (--url URL | --recipe R) [--speed X] [--limit N]` as one checked value."""

    trace: Path
    url: str | None = None
    recipe: ServingRecipe | None = None
    speed: float = 1.0
    limit: int | None = None
    out: Path | None = None
    model: str | None = None  # the served model name to send (None: the target's own)
    thresholds: str | Path | None = None
    noise: Path | None = None  # a replay of the reference configuration against itself: its drift widens ties
    extra_env: dict[str, str] = field(default_factory=dict)
    extra_args: tuple[str, ...] = ()
    progress: bool = True

    def __post_init__(self) -> None:
        if (self.url is None) == (self.recipe is None):
            raise WorkbenchError("replay: give exactly one of --url (a running service) or --recipe (launched)")
        if not (self.speed > 0 and math.isfinite(self.speed)):
            raise WorkbenchError(f"--speed {self.speed}: a positive factor (1 = as recorded, 2 = twice as fast)")
        if self.limit is not None and self.limit < 1:
            raise WorkbenchError(f"--limit {self.limit}: replay at least one request")
        if not trace_path(self.trace).is_file():
            raise WorkbenchError(f"{self.trace}: no trace there; record one with `ascend-workbench capture`")
        if self.noise is not None and not (Path(self.noise) / "replay.json").is_file():
            raise WorkbenchError(
                f"--noise {self.noise}: no replay.json there; replay the reference against itself first"
            )

    def target(self) -> str:
        return self.url or f"recipe {self.recipe.name}"  # type: ignore[union-attr]

    def identity(self, trace: Path) -> dict[str, Any]:
        what = {"url": self.url} if self.url else self.recipe.identity()  # type: ignore[union-attr]
        return {"trace": file_digest(trace), "limit": self.limit, "speed": self.speed, "target": what}


def noise_drift(directory: Path | None) -> float:
    """The numeric noise a replay of the reference against itself measured: the 99th percentile of its
    per-request drift (greedy) and mean |delta| (sampled) over the requests it judged alike."""
    if directory is None:
        return 0.0
    rows = [r for r in read_replay(directory)["requests"] if r["parity"] in ("identical", "near_tie")]
    values = [
        max(r.get("drift") or 0.0, r.get("gap") or 0.0 if r["judged_as"] == "distribution" else 0.0) for r in rows
    ]
    return float(np.percentile(values, 99)) if values else 0.0


def _phases(request: ReplayRequest, records, directory: Path) -> tuple[dict[str, Any], str]:
    """Phase 1 and 2 against the target; returns the provenance stamp and the model name used."""
    launch = {"extra_env": request.extra_env, "extra_args": request.extra_args} if request.recipe else {}
    with connect(url=request.url, recipe=request.recipe, progress=request.progress, **launch) as server:
        model = request.model or server.model
        done = set(read_lines(directory))
        pending = plan(records, request.speed, done)
        if pending:
            log = JsonlLog(requests_log(directory).path, fsync=False)  # one write per line; see send.py
            run_coroutine(send_all(server.url, model, pending, log, progress=request.progress))
        scored = set(read_scores(directory))
        run_coroutine(score_all(server.url, model, records, scored, scores_log(directory), progress=request.progress))
        stamp = provenance(recipe=request.recipe, url=server.url, model=model)
    return stamp, model


def judge(
    request: ReplayRequest,
    records: list[TraceRecord],
    directory: Path,
    policy: ReplayThresholds,
    stamp: dict[str, Any],
    began: float,
) -> ReplayResult:
    lines, scores = read_lines(directory), read_scores(directory)
    drift = noise_drift(request.noise)
    tolerances = Tolerances.of(policy, drift)
    verdicts = judge_all(records, lines, scores, tolerances)
    answers = {i: line.answer for i, line in lines.items()}
    latency = latency_rows(records, answers, policy.latency)
    attain = attainment(records, answers, policy.latency)
    guard = GuardSummary.of(
        [
            check_output(
                c.text,
                prompt=r.prompt_text(),
                finish_reason=c.finish_reason,
                tool_calls=len(c.tool_calls),
                logprobs=c.logprobs.logprobs if c.logprobs else (),
            )
            for r in records
            if r.id in lines and lines[r.id].answer.ok
            for c in lines[r.id].answer.choices
        ]
    )
    timed = [lines[r.id] for r in records if r.id in lines]
    fidelity = timing_fidelity([t.planned_s for t in timed], [t.sent_s for t in timed])
    return ReplayResult(
        directory,
        str(trace_path(request.trace)),
        request.target(),
        request.speed,
        tuple(verdicts),
        tuple(latency),
        tuple(attain),
        fidelity,
        guard,
        tolerances,
        judge_replay(verdicts, latency, attain, policy),
        stamp,
        drift,
        round(time.monotonic() - began, 2),
    )


def run_replay(request: ReplayRequest) -> ReplayResult:
    """Replay, score, judge, write `replay.json` (see the module docstring)."""
    began = time.monotonic()
    policy = load_thresholds(request.thresholds)
    records = list(read_trace(request.trace, request.limit))
    directory = Path(request.out) if request.out is not None else run_dir("replay", fresh=True)
    check_plan(directory, request.identity(trace_path(request.trace)))
    stamp, _ = _phases(request, records, directory)
    result = judge(request, records, directory, policy, stamp, began)
    result.write()
    return result


def worst(result: ReplayResult, parity: Parity = Parity.DIFFERENT) -> list[str]:
    """Ids of the requests of a class, earliest divergence first."""
    rows = sorted(result.of(parity), key=lambda v: v.position if v.position is not None else 1 << 30)
    return [v.id for v in rows]


__all__ = ["ReplayRequest", "judge", "noise_drift", "run_replay", "worst"]
