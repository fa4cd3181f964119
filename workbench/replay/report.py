"""A finished replay: every request's class, the tables, the latency comparison and the verdict.

The verdict on the workbench's one scale (docs/METHOD.md §18):
- error: a request is `broken` beyond `broken_share.error`, or `different` beyond `different_share.error`, or a
  latency quantile's interval lies wholly beyond `slower_ratio.error`, or SLO attainment fell beyond its error;
- warning: the same against the warning limits;
- pass otherwise. Each reason names the number, the limit and the requests behind it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.evaluate.thresholds import judge_loss
from workbench.replay.fidelity import TimingFidelity
from workbench.replay.latency import Attainment, LatencyRow
from workbench.replay.parity import Parity, RequestVerdict, Tolerances
from workbench.replay.policy import ReplayThresholds
from workbench.results.envelope import DocumentKind, write_result
from workbench.results.verdict import Verdict
from workbench.serving.guard import GuardSummary
from workbench.serving.load.trace import TraceRecord

REPLAY_KIND = DocumentKind("replay", 1)
RESULT_FILE = "replay.json"
SHOWN_IDS = 8  # request ids named per verdict reason


@dataclass(frozen=True)
class ReplayVerdict:
    verdict: Verdict
    reasons: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"verdict": self.verdict.value, "reasons": list(self.reasons)}


def _ids(verdicts: Sequence[RequestVerdict]) -> str:
    shown = ", ".join(v.id for v in verdicts[:SHOWN_IDS])
    return shown + (f" and {len(verdicts) - SHOWN_IDS} more" if len(verdicts) > SHOWN_IDS else "")


def judge_replay(
    verdicts: Sequence[RequestVerdict],
    latency: Sequence[LatencyRow],
    attain: Sequence[Attainment],
    policy: ReplayThresholds,
) -> ReplayVerdict:
    judged = [v for v in verdicts if v.parity is not Parity.NO_REFERENCE]
    reasons, found = [], []
    for parity, band in ((Parity.BROKEN, policy.broken_share), (Parity.DIFFERENT, policy.different_share)):
        hits = [v for v in judged if v.parity is parity]
        share = len(hits) / len(judged) if judged else 0.0
        verdict = judge_loss(share, band) or Verdict.PASS
        found.append(verdict)
        if verdict is not Verdict.PASS:
            reasons.append(f"{len(hits)} of {len(judged)} requests {parity.value} ({share:.1%}): {_ids(hits)}")
    for row in latency:
        found.append(row.verdict)
        if row.verdict is not Verdict.PASS:
            reasons.append(
                f"{row.request_class}: p{row.quantile:g} {row.metric} {row.ratio:.2f}x the recorded "
                f"(interval {row.low:.2f}-{row.high:.2f}x, {row.requests} requests): "
                f"{row.recorded_ms:.0f} -> {row.replayed_ms:.0f} ms"
            )
    for row in attain:
        found.append(row.verdict)
        if row.verdict is not Verdict.PASS:
            reasons.append(f"{row.request_class}: SLO attainment {row.recorded:.0%} -> {row.replayed:.0%}")
    verdict = Verdict.worst(found)
    if verdict is Verdict.PASS:
        same = sum(v.parity.rank <= Parity.SCHEMA_VALID.rank for v in judged)
        reasons.append(f"{same} of {len(judged)} requests answered alike; latency within the policy")
    return ReplayVerdict(verdict, tuple(reasons))


@dataclass(frozen=True)
class ReplayResult:
    """One replay (see the module docstring); `verdicts` in trace order."""

    directory: Path
    trace: str
    target: str
    speed: float
    verdicts: tuple[RequestVerdict, ...]
    latency: tuple[LatencyRow, ...]
    attainment: tuple[Attainment, ...]
    fidelity: TimingFidelity | None
    guard: GuardSummary
    tolerances: Tolerances
    verdict: ReplayVerdict
    provenance: dict[str, Any] = field(default_factory=dict)
    noise_drift: float = 0.0
    wall_s: float = 0.0

    def counts(self) -> Counter:
        return Counter(v.parity for v in self.verdicts)

    def parity_table(self) -> pd.DataFrame:
        """One row per class, worst first: requests and share."""
        counts, total = self.counts(), len(self.verdicts) or 1
        rows = [
            {"parity": p.value, "requests": counts.get(p, 0), "share": counts.get(p, 0) / total}
            for p in sorted(Parity, key=lambda p: -p.rank)
            if counts.get(p, 0)
        ]
        return pd.DataFrame(rows, columns=["parity", "requests", "share"])

    def class_table(self) -> pd.DataFrame:
        """Request class x parity class: how each kind of request fared."""
        frame = pd.DataFrame([{"class": v.request_class, "parity": v.parity.value} for v in self.verdicts])
        if frame.empty:
            return frame
        order = [p.value for p in sorted(Parity, key=lambda p: -p.rank) if p.value in set(frame["parity"])]
        return pd.crosstab(frame["class"], frame["parity"]).reindex(columns=order, fill_value=0)

    def request_table(self) -> pd.DataFrame:
        """Every request, the worst first (then by how early it diverged)."""
        rows = sorted(self.verdicts, key=lambda v: (-v.parity.rank, v.position if v.position is not None else 1 << 30))
        return pd.DataFrame([v.row() for v in rows])

    def latency_table(self) -> pd.DataFrame:
        return pd.DataFrame([r.row() for r in self.latency])

    def attainment_table(self) -> pd.DataFrame:
        return pd.DataFrame([r.row() for r in self.attainment])

    def of(self, parity: Parity) -> list[RequestVerdict]:
        return [v for v in self.verdicts if v.parity is parity]

    def text(self) -> str:
        lines = [
            f"replay {self.directory}",
            f"  trace: {self.trace}",
            f"  target: {self.target}, speed {self.speed:g}x",
            f"  tolerances: tie {self.tolerances.tie_nats:.3g} nats, distribution "
            f"{self.tolerances.distribution_nats:.3g} nats/token (noise drift {self.noise_drift:.3g})",
        ]
        lines.append(self.parity_table().to_string(index=False, formatters={"share": "{:.1%}".format}))
        if self.fidelity is not None:
            f = self.fidelity
            lines.append(
                f"timing: inter-arrival error p50 {f.inter_arrival_error_p50_ms:.1f} ms, p99 "
                f"{f.inter_arrival_error_p99_ms:.1f} ms; rate {f.achieved_rate:.2f}/s (planned "
                f"{f.planned_rate:.2f}/s)"
            )
        lines.append(self.guard.line())
        worst = [v for v in self.request_table().head(5).to_dict("records") if v["parity"] in ("broken", "different")]
        lines += [f"  {v['id']} ({v['class']}): {v['parity']}: {v['detail']}" for v in worst]
        lines.append(f"verdict: {self.verdict.verdict.value}")
        lines += [f"  - {reason}" for reason in self.verdict.reasons]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "trace": self.trace,
            "target": self.target,
            "speed": self.speed,
            "counts": {p.value: n for p, n in self.counts().items()},
            "tolerances": vars(self.tolerances),
            "noise_drift": self.noise_drift,
            "verdict": self.verdict.to_dict(),
            "requests": [v.row() for v in self.verdicts],
            "latency": [r.row() for r in self.latency],
            "attainment": [r.row() for r in self.attainment],
            "timing": self.fidelity.to_dict() if self.fidelity else None,
            "guard": self.guard.to_dict(),
            "wall_s": self.wall_s,
        }

    def write(self) -> Path:
        return write_result(self.directory / RESULT_FILE, self.to_dict(), self.provenance, REPLAY_KIND)


def trace_table(records: Sequence[TraceRecord]) -> pd.DataFrame:
    """One row per recorded request: class, conversation, when, greedy or sampled, the start of its answer."""
    rows = []
    for r in records:
        first = r.answer.choices[0] if r.answer is not None and r.answer.choices else None
        text = (first.text + "".join(f" [{c.name}]" for c in first.tool_calls)) if first else ""
        rows.append(
            {
                "id": r.id,
                "class": r.request_class,
                "session": r.session,
                "turn": r.turn,
                "after": r.parent,
                "at_s": round(r.arrival_s, 2),
                "greedy": r.greedy,
                "answer": text[:60],
            }
        )
    return pd.DataFrame(rows)


def read_replay(directory: str | Path) -> dict[str, Any]:
    """A finished replay's `replay.json` (checked to be one)."""
    return REPLAY_KIND.read(Path(directory) / RESULT_FILE)


__all__ = ["REPLAY_KIND", "ReplayResult", "ReplayVerdict", "judge_replay", "read_replay", "trace_table"]
