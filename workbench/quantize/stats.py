"""The numbers the autopilot judges by: NLL rise with a bootstrap interval, and rank agreement.

NLL rise of a plan against the float model, over the same texts (paired by id):

    rise = sum_i nll_plan[i] / sum_i nll_float[i] - 1          (x 100 = percent; same tokens on both sides,
                                                               so it is the rise of the mean NLL per token)

Its 95% interval comes from a paired bootstrap over texts: resample the texts with replacement (seeded),
recompute the ratio, take the 2.5th and 97.5th percentiles. The verdict reads the upper end: a plan holds
a budget of 1% only when even the unlucky end of the interval stays under 1%.

Agreement of a proxy's ranking with the oracle's:

    Spearman     Pearson correlation of the ranks (ties get their mean rank)
    precision@k  |top-k by proxy  ∩  top-k by oracle| / k
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from workbench.errors import WorkbenchError

BOOTSTRAP_SAMPLES = 2000
BOOTSTRAP_SEED = 0


@dataclass(frozen=True)
class Rise:
    """A plan's NLL rise over the float model (percent), with the paired-bootstrap 95% interval."""

    percent: float
    low: float
    high: float
    texts: int
    tokens: int | None  # scored tokens, where the caller counted them (None: not counted, never a made-up 0)

    def to_dict(self) -> dict[str, float | int | None]:
        return {"percent": self.percent, "low": self.low, "high": self.high, "texts": self.texts, "tokens": self.tokens}

    def text(self) -> str:
        return f"{self.percent:+.3f}% [95% CI {self.low:+.3f}, {self.high:+.3f}] over {self.texts} texts"


def paired(plan: Mapping[str, float], reference: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """(plan, reference) NLL sums of the texts both sides scored, in one order."""
    common = sorted(set(plan) & set(reference))
    if not common:
        raise WorkbenchError("the plan and the float model scored no text in common; score the same split")
    return np.array([plan[k] for k in common], dtype=np.float64), np.array([reference[k] for k in common])


def nll_rise(
    plan: Mapping[str, float],
    reference: Mapping[str, float],
    tokens: int | None = None,
    *,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = 0.95,
) -> Rise:
    """Percent rise of the plan's NLL over the reference's, by text id, with its `confidence` bootstrap interval."""
    a, b = paired(plan, reference)
    if b.sum() <= 0:
        raise WorkbenchError("the float model's NLL over these texts is zero; score texts with references")
    point = 100.0 * (a.sum() / b.sum() - 1.0)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(a), size=(samples, len(a)))  # [samples, texts]
    ratios = 100.0 * (a[picks].sum(axis=1) / b[picks].sum(axis=1) - 1.0)
    tail = 50.0 * (1.0 - confidence)
    low, high = np.percentile(ratios, [tail, 100.0 - tail])
    return Rise(float(point), float(low), float(high), len(a), tokens)


def ranks(values: Sequence[float]) -> np.ndarray:
    """1-based ranks, ascending, ties sharing their mean rank. [3, 1, 3] -> [2.5, 1, 2.5]."""
    x = np.asarray(values, dtype=np.float64)
    order = np.argsort(x, kind="mergesort")
    out = np.empty(len(x))
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and x[order[j + 1]] == x[order[i]]:
            j += 1
        out[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation of two equally long score lists (nan when either is constant)."""
    if len(a) != len(b) or len(a) < 2:
        raise ValueError("spearman needs two lists of the same length, at least 2")
    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def top_k(scores: Mapping[str, float], k: int) -> list[str]:
    """The k names with the highest scores (ties broken by name, so the result is deterministic)."""
    return [name for name, _ in sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]]


def precision_at_k(proxy: Mapping[str, float], oracle: Mapping[str, float], k: int) -> float:
    """Share of the oracle's top k that the proxy's top k holds."""
    if k < 1:
        raise ValueError("k must be at least 1")
    return len(set(top_k(proxy, k)) & set(top_k(oracle, k))) / k
