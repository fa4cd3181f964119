"""The accuracy thresholds of `evaluate --reference`: a recipe kind (`recipes/evaluate/*.yaml`).

How much worse a configuration (W8A8, a new stack) may be than its reference on each kind of data set
before the verdict says "warn" or "fail", and when to say that code degrades more than prose
(docs/METHOD.md §13). Read through the one recipe reader, so a typo names the file, the key and the
closest valid key.
"""

from __future__ import annotations

import enum
from pathlib import Path

from pydantic import Field, model_validator

from workbench.evaluate.datasets import DatasetKind
from workbench.recipes import Frozen, load_recipe_file, resolve_recipe_path
from workbench.settings import recipes_dir

DEFAULT_THRESHOLDS = "thresholds"


class Level(str, enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    NO_DATA = "no data"

    @property
    def rank(self) -> int:
        return {"no data": 0, "pass": 1, "warn": 2, "fail": 3}[self.value]


class Band(Frozen):
    """`warn` and `fail` limits of one metric; either may be left out."""

    warn: float | None = None
    fail: float | None = None


class KindThresholds(Frozen):
    """Limits for one kind of data set. NLL and pass@1 limits are maxima of a loss; agreement, minima."""

    nll_increase_pct: Band = Band()  # relative rise of the mean NLL per token, percent
    pass_at_1_drop_pct: Band = Band()  # fall of pass@1 in percentage points
    greedy_agreement: Band = Band()  # mean common-prefix fraction of greedy completions (0..1)

    @model_validator(mode="after")
    def _ordered(self) -> KindThresholds:
        for name in ("nll_increase_pct", "pass_at_1_drop_pct"):
            band = getattr(self, name)
            if band.warn is not None and band.fail is not None and band.warn > band.fail:
                raise ValueError(f"{name}: warn ({band.warn}) must not exceed fail ({band.fail})")
        band = self.greedy_agreement
        if band.warn is not None and band.fail is not None and band.warn < band.fail:
            raise ValueError(f"greedy_agreement: warn ({band.warn}) must not be below fail ({band.fail})")
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


def judge_loss(value: float | None, band: Band) -> Level:
    """Level of a loss (higher is worse): beyond `fail` -> FAIL, beyond `warn` -> WARN."""
    if value is None or value != value:  # None or NaN
        return Level.NO_DATA
    if band.fail is not None and value > band.fail:
        return Level.FAIL
    if band.warn is not None and value > band.warn:
        return Level.WARN
    return Level.PASS


def judge_minimum(value: float | None, band: Band) -> Level:
    """Level of a score (lower is worse): below `fail` -> FAIL, below `warn` -> WARN."""
    if value is None or value != value:
        return Level.NO_DATA
    if band.fail is not None and value < band.fail:
        return Level.FAIL
    if band.warn is not None and value < band.warn:
        return Level.WARN
    return Level.PASS


def thresholds_dir() -> Path:
    return recipes_dir() / "evaluate"


def load_thresholds(name_or_path: str | Path | None = None) -> EvaluateThresholds:
    """The shipped `recipes/evaluate/thresholds.yaml`, another shipped name, or a file of your own."""
    path = resolve_recipe_path(thresholds_dir(), name_or_path or DEFAULT_THRESHOLDS, "evaluate thresholds file")
    return load_recipe_file(EvaluateThresholds, path, what="evaluate thresholds file", required="kinds")
