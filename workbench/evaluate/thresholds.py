"""The accuracy thresholds of `evaluate --reference`: policy data (`policy/evaluate/*.yaml`), read through the one recipe reader.

How much worse a configuration (W8A8, a new stack) may be than its reference on each kind of data set
before the verdict says "warning" or "error" (the workbench's one verdict scale,
`workbench.results.verdict.Verdict`), and when to say that code degrades more than prose
(docs/METHOD.md §13). Read through the one recipe reader, so a typo names the file, the key and the
closest valid key. A metric that could not be measured (no problem on both sides) has no verdict (None).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from workbench.evaluate.datasets import DatasetKind
from workbench.recipes import Frozen, load_recipe_file, resolve_recipe_path
from workbench.results.verdict import Verdict
from workbench.settings import policy_dir

DEFAULT_THRESHOLDS = "thresholds"


class Band(Frozen):
    """`warning` and `error` limits of one metric; either may be left out."""

    warning: float | None = None
    error: float | None = None


class KindThresholds(Frozen):
    """Limits for one kind of data set. NLL and pass@1 limits are maxima of a loss; agreement, minima."""

    nll_increase_pct: Band = Band()  # relative rise of the mean NLL per token, percent
    pass_at_1_drop_pct: Band = Band()  # fall of pass@1 in percentage points
    greedy_agreement: Band = Band()  # mean common-prefix fraction of greedy completions (0..1)

    @model_validator(mode="after")
    def _ordered(self) -> KindThresholds:
        for name in ("nll_increase_pct", "pass_at_1_drop_pct"):
            band = getattr(self, name)
            if band.warning is not None and band.error is not None and band.warning > band.error:
                raise ValueError(f"{name}: warning ({band.warning}) must not exceed error ({band.error})")
        band = self.greedy_agreement
        if band.warning is not None and band.error is not None and band.warning < band.error:
            raise ValueError(f"greedy_agreement: warning ({band.warning}) must not be below error ({band.error})")
        return self


class CodeVsProse(Frozen):
    """Say "code degrades more than prose" when code's NLL rise is `ratio` times prose's and at least `min_pct`."""

    ratio: float = Field(1.5, gt=1.0)
    min_pct: float = Field(0.5, ge=0.0)


class EvaluateThresholds(Frozen):
    name: str
    description: str = ""
    kinds: dict[DatasetKind, KindThresholds]
    code_vs_prose: CodeVsProse = CodeVsProse()
    source: Path | None = Field(None, exclude=True)

    def for_kind(self, kind: DatasetKind) -> KindThresholds:
        return self.kinds.get(kind, KindThresholds())


def judge_loss(value: float | None, band: Band) -> Verdict | None:
    """Verdict on a loss (higher is worse): beyond `error` -> ERROR, beyond `warning` -> WARNING; None: no data."""
    if value is None or value != value:  # None or NaN
        return None
    if band.error is not None and value > band.error:
        return Verdict.ERROR
    if band.warning is not None and value > band.warning:
        return Verdict.WARNING
    return Verdict.PASS


def judge_minimum(value: float | None, band: Band) -> Verdict | None:
    """Verdict on a score (lower is worse): below `error` -> ERROR, below `warning` -> WARNING; None: no data."""
    if value is None or value != value:
        return None
    if band.error is not None and value < band.error:
        return Verdict.ERROR
    if band.warning is not None and value < band.warning:
        return Verdict.WARNING
    return Verdict.PASS


def thresholds_dir() -> Path:
    return policy_dir() / "evaluate"


def load_thresholds(name_or_path: str | Path | None = None) -> EvaluateThresholds:
    """The shipped `policy/evaluate/thresholds.yaml`, another shipped name, or a file of your own."""
    path = resolve_recipe_path(thresholds_dir(), name_or_path or DEFAULT_THRESHOLDS, "evaluate thresholds file")
    return load_recipe_file(EvaluateThresholds, path, what="evaluate thresholds file", required="kinds")
