"""The verdict per request: how a replayed answer compares with the recorded one.

Classes, best to worst (`Parity`):

- `identical`: the same text, tool calls and finish reason (greedy); for a sampled request, the new service
  gives every token of the recorded answer the recorded logprob within `drift_tolerance_nats`;
- `near_tie`: greedy: the first diverging token was nearly tied on both sides — the two tokens' log-odds moved
  by at most `tie_tolerance_nats` (the gap of `workbench.twin.diverge`: the recorded side's margin for its token
  plus the new side's margin for its own); sampled: the mean per-token |logprob difference| over the recorded
  answer is within `distribution_tolerance_nats`;
- `same_tool_call`: the text differs but every tool call has the same name and the same arguments as JSON;
- `schema_valid`: the text differs but the request's `response_format` is honoured (parsed, schema-valid);
- `different`: none of the above;
- `broken`: an error status, or the guard (`workbench.serving.guard`) finds on the new answer a problem the
  recorded one did not have (empty, cut, NaN logprobs, a loop, garbled text, a language switch);
- `no_reference`: nothing recorded to compare with (an imported trace, or the recording itself failed);
  only `broken` is judged.

Sampled requests (temperature > 0) are judged as distributions, never token by token: two samples differ by
design. The recorded answer's tokens were scored under the recorded service at capture time
(`workbench.replay.logprobs.score_answer`) and are scored again under the new one after the replay; the
per-token differences decide. A request with several choices (`n`) gets its worst choice's class. Pure.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import jsonschema

from workbench.replay.policy import ReplayThresholds
from workbench.replay.store import ReplayLine, ScoreLine
from workbench.results.verdict import Verdict
from workbench.serving.guard import GuardThresholds, check_output
from workbench.serving.load.trace import Choice, TokenLogprobs, TraceRecord


class Parity(str, enum.Enum):
    IDENTICAL = "identical"
    NEAR_TIE = "near_tie"
    SAME_TOOL_CALL = "same_tool_call"
    SCHEMA_VALID = "schema_valid"
    DIFFERENT = "different"
    BROKEN = "broken"
    NO_REFERENCE = "no_reference"

    @property
    def rank(self) -> int:
        """Worst first sorts by descending rank; `no_reference` last."""
        return _RANK[self]

    @property
    def verdict(self) -> Verdict:
        return {Parity.DIFFERENT: Verdict.WARNING, Parity.BROKEN: Verdict.ERROR}.get(self, Verdict.PASS)


_RANK = {
    Parity.IDENTICAL: 1,
    Parity.NEAR_TIE: 2,
    Parity.SAME_TOOL_CALL: 3,
    Parity.SCHEMA_VALID: 4,
    Parity.DIFFERENT: 5,
    Parity.BROKEN: 6,
    Parity.NO_REFERENCE: 0,
}


class JudgedAs(str, enum.Enum):
    TOKENS = "tokens"  # greedy: token by token
    DISTRIBUTION = "distribution"  # sampled: the recorded answer's likelihood under both services
    GUARD = "guard"  # nothing to compare with: the guard alone


@dataclass(frozen=True)
class ChoiceVerdict:
    parity: Parity
    detail: str
    position: int | None = None  # first diverging token (greedy)
    gap: float | None = None  # nats (greedy divergence) or mean |delta| per token (sampled)
    drift: float = 0.0  # largest |logprob difference| over the tokens both sides agree on
    guard: tuple[str, ...] = ()


@dataclass(frozen=True)
class Tolerances:
    """The tolerances in force (the policy's, raised to the noise when a noise replay was given)."""

    tie_nats: float
    drift_nats: float
    distribution_nats: float

    @classmethod
    def of(cls, policy: ReplayThresholds, noise_drift: float = 0.0) -> Tolerances:
        lift = policy.noise_factor * noise_drift
        return cls(
            max(policy.tie_tolerance_nats, lift),
            max(policy.drift_tolerance_nats, lift),
            max(policy.distribution_tolerance_nats, lift),
        )


# -- greedy: the first diverging token ------------------------------------------------------------------


def _margin(own: float | None, other: float | None, top: Mapping[str, float]) -> tuple[float | None, bool]:
    """(own - other, lower bound?); `other` outside the runners-up is at most the smallest of them."""
    if own is None:
        return None, False
    if other is not None:
        return max(own - other, 0.0), False
    return (max(own - min(top.values()), 0.0), True) if top else (None, True)


def first_divergence(a: TokenLogprobs, b: TokenLogprobs, tie: float) -> ChoiceVerdict | None:
    """Where recorded `a` and replayed `b` part, judged at `tie` (None: the same tokens)."""
    common = next((i for i, (x, y) in enumerate(zip(a.tokens, b.tokens)) if x != y), min(len(a.tokens), len(b.tokens)))
    drift = max((abs(x - y) for x, y in zip(a.logprobs[:common], b.logprobs[:common])), default=0.0)
    if common == len(a.tokens) == len(b.tokens):
        return None
    if common >= min(len(a.tokens), len(b.tokens)):
        ended = "recorded" if common >= len(a.tokens) else "replayed"
        return ChoiceVerdict(Parity.DIFFERENT, f"the {ended} answer ended after {common} tokens", common, None, drift)
    token_a, token_b = a.tokens[common], b.tokens[common]
    top_a, top_b = a.top[common] if common < len(a.top) else {}, b.top[common] if common < len(b.top) else {}
    margin_a, bound_a = _margin(a.logprobs[common], top_a.get(token_b), top_a)
    margin_b, bound_b = _margin(b.logprobs[common], top_b.get(token_a), top_b)
    if margin_a is None or margin_b is None:
        return ChoiceVerdict(Parity.DIFFERENT, f"diverged at token {common}", common, None, drift)
    gap, bound = margin_a + margin_b, bound_a or bound_b
    if not bound and gap <= tie:
        return ChoiceVerdict(Parity.NEAR_TIE, f"near tie at token {common}: {gap:.3g} nats", common, gap, drift)
    shown = f"{'>= ' if bound else ''}{gap:.3g}"
    return ChoiceVerdict(Parity.DIFFERENT, f"diverged at token {common}: {shown} nats", common, gap, drift)


# -- the other classes -------------------------------------------------------------------------------


def same_tool_calls(a: Choice, b: Choice) -> bool:
    def parsed(arguments: str) -> object:
        try:
            return json.loads(arguments)
        except (json.JSONDecodeError, TypeError):
            return arguments

    if not a.tool_calls or len(a.tool_calls) != len(b.tool_calls):
        return False
    return all(
        x.name == y.name and parsed(x.arguments) == parsed(y.arguments) for x, y in zip(a.tool_calls, b.tool_calls)
    )


def honours_format(body: Mapping[str, object], text: str) -> bool | None:
    """Whether `text` honours the request's `response_format` (None: the request asked for no JSON)."""
    spec = body.get("response_format")
    if not isinstance(spec, Mapping) or spec.get("type") not in ("json_object", "json_schema"):
        return None
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return False
    schema = (spec.get("json_schema") or {}).get("schema") if spec.get("type") == "json_schema" else None
    if schema is None:
        return isinstance(value, dict)
    try:
        jsonschema.validate(value, schema)
    except (jsonschema.ValidationError, jsonschema.SchemaError):
        return False
    return True


def guard_findings(record: TraceRecord, choice: Choice, thresholds: GuardThresholds | None) -> set[str]:
    logprobs = choice.logprobs.logprobs if choice.logprobs else ()
    found = check_output(
        choice.text,
        prompt=record.prompt_text(),
        finish_reason=choice.finish_reason,
        logprobs=logprobs,
        tool_calls=len(choice.tool_calls),
        thresholds=thresholds,
    )
    return {f.text() for f in found}


def _issues(findings: set[str]) -> set[str]:
    return {f.split(":", 1)[0] for f in findings}


def _distribution(recorded: Choice, score: ScoreLine | None, tol: Tolerances) -> ChoiceVerdict | None:
    """A sampled choice judged by its recorded answer's per-token logprobs under both services."""
    if recorded.score is None or score is None or score.score is None:
        return None
    deltas = [n - r for r, n in zip(recorded.score.logprobs, score.score.logprobs)]
    if not deltas or any(not math.isfinite(d) for d in deltas):
        return ChoiceVerdict(Parity.BROKEN, "the recorded answer scores NaN or infinite under the new service")
    worst, mean_abs, mean = (
        max(abs(d) for d in deltas),
        sum(abs(d) for d in deltas) / len(deltas),
        sum(deltas) / len(deltas),
    )
    line = f"recorded answer {mean:+.3g} nats/token under the new service (max |delta| {worst:.3g})"
    if worst <= tol.drift_nats:
        return ChoiceVerdict(Parity.IDENTICAL, f"same distribution: {line}", gap=mean_abs, drift=worst)
    if mean_abs <= tol.distribution_nats:
        return ChoiceVerdict(Parity.NEAR_TIE, f"close distribution: {line}", gap=mean_abs, drift=worst)
    return ChoiceVerdict(Parity.DIFFERENT, f"another distribution: {line}", gap=mean_abs, drift=worst)


def _greedy(record: TraceRecord, recorded: Choice, replayed: Choice, tol: Tolerances) -> ChoiceVerdict:
    same_text = recorded.text == replayed.text and recorded.tool_calls == replayed.tool_calls
    diverged = None
    if recorded.logprobs is not None and replayed.logprobs is not None:
        diverged = first_divergence(recorded.logprobs, replayed.logprobs, tol.tie_nats)
        drift = diverged.drift if diverged else _drift(recorded.logprobs, replayed.logprobs)
    else:
        drift = 0.0
    if same_text and recorded.finish_reason in (None, replayed.finish_reason):  # None: the recording did not say
        return ChoiceVerdict(Parity.IDENTICAL, "identical", drift=drift)
    if diverged is not None and diverged.parity is Parity.NEAR_TIE:
        return diverged
    if (other := _as_alternate(recorded, replayed, tol)) is not None:
        return other
    return _other_classes(record, recorded, replayed, diverged, drift)


def _as_alternate(recorded: Choice, replayed: Choice, tol: Tolerances) -> ChoiceVerdict | None:
    """A near tie when the replay gave (or nearly tied with) the answer the recorded service itself gave when
    asked the same request again: that difference is the reference configuration's own noise."""
    other = recorded.alternate
    if other is None:
        return None
    if other.text == replayed.text and other.tool_calls == replayed.tool_calls:
        return ChoiceVerdict(Parity.NEAR_TIE, "the recorded service gave this answer too, when asked again")
    if other.logprobs is not None and replayed.logprobs is not None:
        found = first_divergence(other.logprobs, replayed.logprobs, tol.tie_nats)
        if found is not None and found.parity is Parity.NEAR_TIE:
            return replace(found, detail=f"{found.detail} against the recorded service's second answer")
    return None


def _other_classes(record, recorded: Choice, replayed: Choice, diverged: ChoiceVerdict | None, drift: float):
    where = diverged.detail if diverged is not None else "the text differs (no logprobs recorded to tell a tie)"
    position, gap = (diverged.position, diverged.gap) if diverged is not None else (None, None)
    if same_tool_calls(recorded, replayed):
        return ChoiceVerdict(Parity.SAME_TOOL_CALL, f"same tool calls; {where}", position, gap, drift)
    honoured = honours_format(record.body, replayed.text)
    if honoured:
        return ChoiceVerdict(Parity.SCHEMA_VALID, f"response_format honoured; {where}", position, gap, drift)
    if honoured is False:
        where = f"response_format not honoured; {where}"
    return ChoiceVerdict(Parity.DIFFERENT, where, position, gap, drift)


def _drift(a: TokenLogprobs, b: TokenLogprobs) -> float:
    return max((abs(x - y) for x, y in zip(a.logprobs, b.logprobs)), default=0.0)


def _sampled(record, recorded: Choice, replayed: Choice, score: ScoreLine | None, tol: Tolerances) -> ChoiceVerdict:
    if recorded.text == replayed.text and recorded.tool_calls == replayed.tool_calls:
        return ChoiceVerdict(Parity.IDENTICAL, "the same sample")
    by_distribution = _distribution(recorded, score, tol)
    if by_distribution is not None and by_distribution.parity is not Parity.DIFFERENT:
        return by_distribution
    verdict = _other_classes(record, recorded, replayed, None, 0.0)
    if by_distribution is not None and verdict.parity is Parity.DIFFERENT:
        return by_distribution
    if by_distribution is None and verdict.parity is Parity.DIFFERENT:
        return ChoiceVerdict(Parity.NO_REFERENCE, "sampled and not scored: judged by the guard alone")
    return verdict


def judge_choice(
    record: TraceRecord,
    recorded: Choice | None,
    replayed: Choice,
    score: ScoreLine | None,
    tol: Tolerances,
    guard: GuardThresholds | None = None,
) -> tuple[ChoiceVerdict, JudgedAs]:
    """One choice: broken first (guard problems the recording did not have), then the comparison."""
    found = guard_findings(record, replayed, guard)
    inherited = _issues(guard_findings(record, recorded, guard)) if recorded is not None else set()
    new = sorted(f for f in found if f.split(":", 1)[0] not in inherited)
    if new:
        return ChoiceVerdict(Parity.BROKEN, "; ".join(new), guard=tuple(sorted(found))), JudgedAs.GUARD
    if recorded is None:
        return ChoiceVerdict(Parity.NO_REFERENCE, "no recorded answer", guard=tuple(sorted(found))), JudgedAs.GUARD
    if record.greedy:
        return _greedy(record, recorded, replayed, tol), JudgedAs.TOKENS
    return _sampled(record, recorded, replayed, score, tol), JudgedAs.DISTRIBUTION


@dataclass(frozen=True)
class RequestVerdict:
    """One request's class and why (the worst choice's, for `n` > 1)."""

    id: str
    request_class: str
    judged_as: JudgedAs
    parity: Parity
    detail: str
    choice: int = 0
    position: int | None = None
    gap: float | None = None
    drift: float = 0.0
    guard: tuple[str, ...] = ()
    recorded: str = ""
    replayed: str = ""

    def row(self) -> dict:
        return {
            "id": self.id,
            "class": self.request_class,
            "judged_as": self.judged_as.value,
            "parity": self.parity.value,
            "detail": self.detail,
            "choice": self.choice,
            "position": self.position,
            "gap": self.gap,
            "drift": self.drift,
            "guard": list(self.guard),
            "recorded": self.recorded,
            "replayed": self.replayed,
        }


def judge_request(
    record: TraceRecord,
    line: ReplayLine,
    scores: Mapping[tuple[str, int], ScoreLine],
    tol: Tolerances,
    guard: GuardThresholds | None = None,
) -> RequestVerdict:
    answer, base = line.answer, {"id": record.id, "request_class": record.request_class}
    if not answer.ok:
        return RequestVerdict(
            **base, judged_as=JudgedAs.GUARD, parity=Parity.BROKEN, detail=f"request failed: {answer.error}"
        )
    if not answer.choices:
        return RequestVerdict(**base, judged_as=JudgedAs.GUARD, parity=Parity.BROKEN, detail="no choices")
    recorded = record.answer.choices if record.answer is not None and record.answer.ok else ()
    worst: RequestVerdict | None = None
    for choice in answer.choices:
        mine = next((c for c in recorded if c.index == choice.index), None)
        verdict, how = judge_choice(record, mine, choice, scores.get((record.id, choice.index)), tol, guard)
        current = RequestVerdict(
            **base,
            judged_as=how,
            parity=verdict.parity,
            detail=verdict.detail,
            choice=choice.index,
            position=verdict.position,
            gap=verdict.gap,
            drift=verdict.drift,
            guard=verdict.guard,
            recorded=_short(mine),
            replayed=_short(choice),
        )
        if worst is None or current.parity.rank > worst.parity.rank:
            worst = current
    assert worst is not None
    return worst


def _short(choice: Choice | None, limit: int = 200) -> str:
    if choice is None:
        return ""
    calls = "".join(f" [{c.name}({c.arguments})]" for c in choice.tool_calls)
    text = (choice.text + calls).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def judge_all(
    records: Sequence[TraceRecord],
    lines: Mapping[str, ReplayLine],
    scores: Mapping[tuple[str, int], ScoreLine],
    tol: Tolerances,
    guard: GuardThresholds | None = None,
) -> list[RequestVerdict]:
    """Every replayed request's verdict, in trace order (requests not replayed yet are left out)."""
    return [judge_request(r, lines[r.id], scores, tol, guard) for r in records if r.id in lines]


__all__ = [
    "ChoiceVerdict",
    "JudgedAs",
    "Parity",
    "RequestVerdict",
    "Tolerances",
    "first_divergence",
    "honours_format",
    "judge_all",
    "judge_choice",
    "judge_request",
    "same_tool_calls",
]
