"""A replay's directory: what was planned, every request's answer as it came, and the scores of sampled ones.

    OUT/plan.json        the trace (path and digest), the target, speed and limit; a rerun with the same --out
                         resumes and refuses a different plan
    OUT/requests.jsonl   one line per replayed request (`REQUEST_KIND`), appended as each answer completes
    OUT/scores.jsonl     one line per sampled choice scored (`SCORE_KIND`): the recorded answer's tokens under
                         the new service
    OUT/replay.json      the judged result (`workbench.replay.report.REPLAY_KIND`)

Every line is stamped with its kind (docs/METHOD.md §16) and appended through `JsonlLog`: a killed replay
keeps every answer it received and sends only the rest when rerun.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.results.envelope import DocumentKind
from workbench.results.files import write_json
from workbench.results.jsonl import JsonlLog
from workbench.serving.load.trace import Answer, Score

REQUEST_KIND = DocumentKind("replay-request", 1)
SCORE_KIND = DocumentKind("replay-score", 1)
PLAN_FILE = "plan.json"
REQUESTS_FILE = "requests.jsonl"
SCORES_FILE = "scores.jsonl"


@dataclass(frozen=True)
class ReplayLine:
    """One replayed request: when it was planned and sent (s from the replay's start) and what came back."""

    id: str
    planned_s: float
    sent_s: float
    answer: Answer

    def to_line(self) -> dict[str, Any]:
        return REQUEST_KIND.stamp() | {
            "id": self.id,
            "planned_s": round(self.planned_s, 6),
            "sent_s": round(self.sent_s, 6),
            "answer": self.answer.to_dict(),
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ReplayLine:
        if not REQUEST_KIND.matches(raw):
            raise ValueError("not a replay-request line")
        answer = Answer.from_dict(raw["answer"])
        return cls(str(raw["id"]), float(raw["planned_s"]), float(raw["sent_s"]), answer)


@dataclass(frozen=True)
class ScoreLine:
    """The recorded answer of one sampled choice, scored under the new service (None: could not be scored)."""

    id: str
    choice: int
    score: Score | None
    error: str | None = None

    def to_line(self) -> dict[str, Any]:
        score = {"token_ids": list(self.score.token_ids), "logprobs": list(self.score.logprobs)} if self.score else None
        return SCORE_KIND.stamp() | {"id": self.id, "choice": self.choice, "score": score, "error": self.error}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ScoreLine:
        if not SCORE_KIND.matches(raw):
            raise ValueError("not a replay-score line")
        score = Score.from_dict(raw["score"]) if raw.get("score") else None
        return cls(str(raw["id"]), int(raw["choice"]), score, raw.get("error"))


def requests_log(directory: Path) -> JsonlLog:
    return JsonlLog(Path(directory) / REQUESTS_FILE)


def scores_log(directory: Path) -> JsonlLog:
    return JsonlLog(Path(directory) / SCORES_FILE)


def read_lines(directory: Path) -> dict[str, ReplayLine]:
    """Every answered request of the run so far, by id (a request sent twice keeps its last answer)."""
    return {line.id: line for line in requests_log(directory).read(ReplayLine.from_dict).records}


def read_scores(directory: Path) -> dict[tuple[str, int], ScoreLine]:
    return {(s.id, s.choice): s for s in scores_log(directory).read(ScoreLine.from_dict).records}


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes (16 hex digits): a resumed replay must replay the very same trace."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def check_plan(directory: Path, identity: dict[str, Any]) -> None:
    """Write the plan of a new run, or check a resumed run's plan is the same (one clear error otherwise)."""
    directory = Path(directory)
    path = directory / PLAN_FILE
    if not path.is_file():
        if directory.is_dir() and any(directory.iterdir()):
            raise WorkbenchError(f"{directory} holds files but no {PLAN_FILE}: it is not a replay; choose a new --out")
        write_json(path, {"identity": identity})
        return
    try:
        stored = json.loads(path.read_text(encoding="utf-8")).get("identity", {})
    except (OSError, ValueError) as exc:
        raise WorkbenchError(
            f"{path} is unreadable ({exc}); choose a new --out (the logs beside it are kept)"
        ) from None
    changed = sorted(k for k in identity if stored.get(k) != identity[k])
    if changed:
        raise WorkbenchError(
            f"{directory} holds a replay of another plan (changed: {', '.join(changed)}); choose a new --out, or rerun "
            "with the arguments it was started with to resume it"
        )


__all__ = [
    "REQUEST_KIND",
    "SCORE_KIND",
    "ReplayLine",
    "ScoreLine",
    "check_plan",
    "file_digest",
    "read_lines",
    "read_scores",
    "requests_log",
    "scores_log",
]
