"""The output guard: does an answer look like an engine talking nonsense? No reference answer needed.

Users of a ported service report the same few shapes of broken output (a labelled set of them, each cited,
is `tests/fixtures/replay/guard_corpus.jsonl`; `benchmarks/bench_replay.py` scores this guard on it):

- **empty**: no text and no tool call (vllm-ascend #14663);
- **cut**: the answer stopped without a finish reason, or was aborted (a stream that broke off);
- **non-finite logprobs**: a NaN or infinite logprob — the sampler saw NaN logits;
- **repetition**: one character run on and on (`!!!!` — the argmax of NaN logits is token 0, vLLM #19022),
  or a phrase looping (vllm-ascend #10503, PR #3769), measured as the share of repeated word 3-grams and as
  how well the text compresses;
- **garbled**: tokens drawn from all over the vocabulary — scripts that never meet in one language side by
  side, replacement characters (vllm-ascend #463, vLLM #6060, #8627);
- **language switch**: the answer's main script is not the prompt's (GLM-5 #54).

`check_output` returns the findings of one answer; `GuardScope.SYNTHETIC` keeps only the checks that hold
for the word-salad prompts and `ignore_eos` outputs of a load test (`bench`, `sweep`): there a loop after
the end of sequence or a script mix is the workload's doing, not the engine's. Thresholds are policy data
(`policy/replay/guard.yaml`), tuned on the corpus's `tune` half only. Pure functions of text and numbers.
"""

from __future__ import annotations

import enum
import math
import unicodedata
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from pydantic import Field

from workbench.recipes import Frozen, load_recipe_file, resolve_recipe_path
from workbench.settings import policy_dir

DEFAULT_GUARD = "guard"
CUT_FINISHES = frozenset({"abort", "error"})  # finish reasons vLLM gives a request it did not complete


class GuardIssue(str, enum.Enum):
    EMPTY = "empty"
    CUT = "cut"
    NON_FINITE = "non_finite_logprobs"
    REPETITION = "repetition"
    GARBLED = "garbled"
    LANGUAGE = "language_switch"


class GuardScope(str, enum.Enum):
    FULL = "full"  # real prompts (replay, twin): every check
    SYNTHETIC = "synthetic"  # load-test prompts and ignore_eos outputs: only what no workload explains


SYNTHETIC_CHECKS = frozenset({GuardIssue.EMPTY, GuardIssue.CUT, GuardIssue.NON_FINITE})


class GuardThresholds(Frozen):
    """policy/replay/guard.yaml (see its comments for each value and how it was chosen)."""

    name: str = DEFAULT_GUARD
    description: str = ""
    max_char_run: int = Field(16, ge=2)
    min_words_for_ngrams: int = Field(12, ge=3)
    max_repeated_trigram_share: float = Field(0.5, gt=0.0, le=1.0)
    min_chars_for_compression: int = Field(200, ge=10)
    min_compression_ratio: float = Field(0.2, gt=0.0, le=1.0)
    max_replacement_chars: int = Field(0, ge=0)
    min_letters_for_scripts: int = Field(8, ge=1)
    max_scripts: int = Field(2, ge=1)
    min_script_share: float = Field(0.05, ge=0.0, le=1.0)
    max_mixed_words_share: float = Field(0.15, ge=0.0, le=1.0)
    min_letters_for_language: int = Field(6, ge=1)
    min_dominant_share: float = Field(0.6, gt=0.0, le=1.0)
    source: Path | None = Field(None, exclude=True)


def load_guard_thresholds(name_or_path: str | Path | None = None) -> GuardThresholds:
    """The shipped `policy/replay/guard.yaml`, another shipped name, or a file of your own."""
    path = resolve_recipe_path(policy_dir() / "replay", name_or_path or DEFAULT_GUARD, "guard thresholds file")
    return load_recipe_file(GuardThresholds, path, what="guard thresholds file", name_from_file=True)


@lru_cache(maxsize=1)
def default_thresholds() -> GuardThresholds:
    return load_guard_thresholds()


@dataclass(frozen=True)
class GuardFinding:
    issue: GuardIssue
    detail: str

    def text(self) -> str:
        return f"{self.issue.value}: {self.detail}"


# -- scripts -------------------------------------------------------------------------------------------

# Scripts that one language writes together count as one group (Japanese mixes kanji and kana).
_GROUP = {
    "CJK": "han",
    "HIRAGANA": "han",
    "KATAKANA": "han",
    "BOPOMOFO": "han",
    "IDEOGRAPHIC": "han",
    "HANGUL": "hangul",
    "LATIN": "latin",
    "CYRILLIC": "cyrillic",
    "GREEK": "greek",
    "ARABIC": "arabic",
    "HEBREW": "hebrew",
    "THAI": "thai",
    "DEVANAGARI": "devanagari",
}


@lru_cache(maxsize=65536)
def script_of(char: str) -> str | None:
    """The script group of a letter ('latin', 'han', ...; 'other' for the rest); None for anything not a letter."""
    if not char.isalpha():
        return None
    name = unicodedata.name(char, "")
    return _GROUP.get(name.split(" ", 1)[0], "other") if name else "other"


def script_shares(text: str) -> tuple[int, Counter]:
    """(letters, Counter of script group -> letters)."""
    counts = Counter(s for s in map(script_of, text) if s is not None)
    return sum(counts.values()), counts


def dominant_script(text: str, thresholds: GuardThresholds) -> str | None:
    letters, counts = script_shares(text)
    if letters < thresholds.min_letters_for_language:
        return None
    script, count = counts.most_common(1)[0]
    return script if count / letters >= thresholds.min_dominant_share else None


def _mixed_word_share(text: str, han_text: bool) -> float:
    """Share of whitespace-separated words whose own letters come from two scripts. Chinese and Japanese lines
    carry Latin words without a space (使用vllm), so in a text written mostly in Han, Latin glued to Han is fine;
    in a Latin text it is not."""
    words = [w for w in text.split() if sum(c.isalpha() for c in w) >= 2]
    if not words:
        return 0.0
    mixed = 0
    for word in words:
        scripts = {s for s in map(script_of, word) if s is not None}
        mixed += len(scripts) >= 2 and not (han_text and scripts == {"han", "latin"})
    return mixed / len(words)


# -- checks ----------------------------------------------------------------------------------------------


def _longest_run(items: Sequence) -> tuple[int, object]:
    """The longest run of one item (a character, or a token id) and the item; whitespace never runs."""
    best, best_char, run, previous = 0, "", 0, None
    for char in items:
        run = run + 1 if char == previous and not (isinstance(char, str) and char.isspace()) else 1
        previous = char
        if run > best:
            best, best_char = run, char
    return best, best_char


def _repeated_trigram_share(words: Sequence[str]) -> float:
    grams = Counter(zip(words, words[1:], words[2:]))
    total = sum(grams.values())
    return sum(n for n in grams.values() if n > 1) / total if total else 0.0


def _units(text: str) -> list[str]:
    """Words, or characters for text written without spaces (Chinese, Japanese)."""
    words = text.split()
    letters, counts = script_shares(text)
    return [c for c in text if not c.isspace()] if letters and counts["han"] / letters > 0.5 else words


def repetition(text: str, t: GuardThresholds) -> str | None:
    run, char = _longest_run(text)
    if run > t.max_char_run:
        return f"{char!r} repeated {run} times"
    units = _units(text)
    if len(units) >= t.min_words_for_ngrams:
        share = _repeated_trigram_share(units)
        if share > t.max_repeated_trigram_share:
            return f"{share:.0%} of its 3-grams repeat"
    raw = text.encode()
    if len(raw) >= t.min_chars_for_compression:
        ratio = len(zlib.compress(raw, 9)) / len(raw)
        if ratio < t.min_compression_ratio:
            return f"compresses to {ratio:.0%} of its size"
    return None


def garbled(text: str, t: GuardThresholds) -> str | None:
    replacements = text.count("\ufffd")
    if replacements > t.max_replacement_chars:
        return f"{replacements} replacement characters (undecodable bytes)"
    controls = sum(unicodedata.category(c) in ("Cc", "Co", "Cn") and c not in "\n\r\t" for c in text)
    if controls:
        return f"{controls} control or unassigned characters"
    letters, counts = script_shares(text)
    if letters < t.min_letters_for_scripts:
        return None
    scripts = [s for s, n in counts.items() if n / letters >= t.min_script_share]
    if len(scripts) > t.max_scripts:
        return f"letters from {len(scripts)} scripts ({', '.join(sorted(scripts))})"
    mixed = _mixed_word_share(text, han_text=counts["han"] / letters > 0.5)
    if mixed > t.max_mixed_words_share:
        return f"{mixed:.0%} of its words mix scripts"
    return None


def language_switch(text: str, prompt: str | None, t: GuardThresholds) -> str | None:
    if not prompt:
        return None
    asked, answered = dominant_script(prompt, t), dominant_script(text, t)
    if asked and answered and asked != answered:
        return f"asked in {asked} script, answered in {answered}"
    return None


def non_finite(logprobs: Iterable[float]) -> str | None:
    bad = sum(not math.isfinite(v) for v in logprobs)
    return f"{bad} logprobs are NaN or infinite" if bad else None


def check_output(
    text: str,
    *,
    prompt: str | None = None,
    finish_reason: str | None = "stop",
    logprobs: Iterable[float] = (),
    tool_calls: int = 0,
    scope: GuardScope = GuardScope.FULL,
    thresholds: GuardThresholds | None = None,
) -> tuple[GuardFinding, ...]:
    """Every guard finding for one answer (none: it looks like an answer). `finish_reason` None means the
    answer ended without one (cut off)."""
    t = thresholds or default_thresholds()
    found: list[GuardFinding] = []
    if not text.strip() and not tool_calls:
        found.append(GuardFinding(GuardIssue.EMPTY, "no text and no tool call"))
    if finish_reason is None or finish_reason in CUT_FINISHES:
        found.append(GuardFinding(GuardIssue.CUT, f"finish reason {finish_reason!r}"))
    if (detail := non_finite(logprobs)) is not None:
        found.append(GuardFinding(GuardIssue.NON_FINITE, detail))
    checks = (
        (GuardIssue.REPETITION, lambda: repetition(text, t)),
        (GuardIssue.GARBLED, lambda: garbled(text, t)),
        (GuardIssue.LANGUAGE, lambda: language_switch(text, prompt, t)),
    )
    for issue, check in checks:
        if scope is GuardScope.FULL or issue in SYNTHETIC_CHECKS:
            if (detail := check()) is not None:
                found.append(GuardFinding(issue, detail))
    if scope is GuardScope.SYNTHETIC and (run := _longest_run(text))[0] > 4 * t.max_char_run:
        found.append(GuardFinding(GuardIssue.REPETITION, f"{run[1]!r} repeated {run[0]} times"))  # NaN -> token 0
    return tuple(found)


def check_tokens(token_ids: Sequence[int], logprobs: Sequence[float], thresholds: GuardThresholds | None = None):
    """The checks that need no text (a twin run holds token ids): empty, non-finite logprobs, one token repeated."""
    t = thresholds or default_thresholds()
    found: list[GuardFinding] = []
    if not token_ids:
        found.append(GuardFinding(GuardIssue.EMPTY, "no tokens"))
    if (detail := non_finite(logprobs)) is not None:
        found.append(GuardFinding(GuardIssue.NON_FINITE, detail))
    run, token = _longest_run(tuple(token_ids))  # type: ignore[arg-type]
    if run > t.max_char_run:
        found.append(GuardFinding(GuardIssue.REPETITION, f"token {token} repeated {run} times"))
    return tuple(found)


@dataclass(frozen=True)
class GuardSummary:
    """How many of a run's answers the guard flagged, by issue, with an example each."""

    answers: int
    flagged: int
    by_issue: Mapping[str, int] = field(default_factory=dict)
    examples: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, findings: Sequence[Sequence[GuardFinding]]) -> GuardSummary:
        by_issue: Counter = Counter()
        examples: dict[str, str] = {}
        for answer in findings:
            for finding in answer:
                by_issue[finding.issue.value] += 1
                examples.setdefault(finding.issue.value, finding.detail)
        return cls(len(findings), sum(bool(f) for f in findings), dict(by_issue), examples)

    def line(self) -> str:
        """'guard: 3 of 64 answers look broken (repetition 2, empty 1)' or 'guard: 64 answers look sane'."""
        if not self.flagged:
            return f"guard: all {self.answers} answers look sane"
        issues = ", ".join(f"{k} {v}" for k, v in sorted(self.by_issue.items(), key=lambda kv: -kv[1]))
        return f"guard: {self.flagged} of {self.answers} answers look broken ({issues})"

    def to_dict(self) -> dict:
        return {
            "answers": self.answers,
            "flagged": self.flagged,
            "by_issue": dict(self.by_issue),
            "examples": dict(self.examples),
        }


__all__ = [
    "GuardFinding",
    "GuardIssue",
    "GuardScope",
    "GuardSummary",
    "GuardThresholds",
    "check_output",
    "check_tokens",
    "default_thresholds",
    "load_guard_thresholds",
    "script_of",
]
