"""The two sides of a twin run: a serving recipe (launched) or a URL (attached), typed; no command-line text here.

A side varies the configuration in one of three ways, which combine:
- another recipe, or the same one twice;
- changes on one side: dotted recipe fields and their values (`{"engine.tensor_parallel_size": 2}`,
  `{"engine.enforce_eager": False}`, `{"env.ASCEND_BACKEND_FAULT": "silu_and_mul:scale:factor=1.1"}`), applied
  with the recipe's own `with_overrides` and validated like the file;
- the batch: prompts per request, so the same server answers each prompt alone on one side and inside a full
  batch on the other (batch invariance).

An attached side may carry its own profiler trace (`trace`): the performance twin's GPU side is a URL plus the
`.pt.trace.json[.gz]` its service wrote (`vllm bench serve --profile`), since the workbench cannot start or
profile a server on another machine. The verb turns `--recipe / --url / --set / --batch / --trace` into these
objects (`workbench.verbs.twin`); notebooks build them directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.recipes import ServingRecipe, stable_hash

LABELS = ("A", "B")
_NESTED = ("engine", "env")
_DESCRIBED = ("engine.tensor_parallel_size", "engine.enforce_eager", "dtype")  # shown by their effect already


@dataclass(frozen=True)
class Side:
    """One side: exactly one of `recipe` (launched, `changes` already applied) and `url` (attached), its batch."""

    label: str
    recipe: ServingRecipe | None = None
    url: str | None = None
    batch: int = 1
    changes: tuple[tuple[str, Any], ...] = ()  # (dotted recipe field, value) applied to the recipe, in order
    trace: Path | None = None  # an attached side's own profiler trace (the performance twin's GPU side)

    def __post_init__(self) -> None:
        if self.label not in LABELS:
            raise WorkbenchError(f"side {self.label!r}: a twin's sides are {' and '.join(LABELS)}")
        if (self.recipe is None) == (self.url is None):
            raise WorkbenchError(f"side {self.label}: give exactly one of a recipe or a URL")
        if self.batch < 1:
            raise WorkbenchError(f"side {self.label}: batch {self.batch}: send at least one prompt per request")
        if self.trace is not None and self.url is None:
            raise WorkbenchError(
                f"side {self.label}: a trace file goes with a URL side; a launched side is profiled by the workbench"
            )

    @classmethod
    def of_recipe(
        cls, label: str, recipe: ServingRecipe, changes: Mapping[str, Any] | None = None, *, batch: int = 1
    ) -> Side:
        """A side the workbench starts from `recipe` with `changes` (dotted field -> value) applied."""
        pairs = tuple((changes or {}).items())
        return cls(label, recipe=apply_changes(recipe, pairs), batch=batch, changes=pairs)

    @classmethod
    def of_url(cls, label: str, url: str, *, batch: int = 1, trace: Path | None = None) -> Side:
        """A side running elsewhere, reached at `url`; `trace`: the profiler trace its service wrote."""
        return cls(label, url=url, batch=batch, trace=Path(trace) if trace is not None else None)

    @property
    def launched(self) -> bool:
        return self.recipe is not None

    def describe(self) -> str:
        """'cpu-tiny (TP=2, eager, float32), batch 16'; other changed fields are listed after the dtype."""
        if self.recipe is None:
            traced = f", trace {self.trace.name}" if self.trace is not None else ""
            return f"{self.url}, batch {self.batch}{traced}"
        engine = self.recipe.engine
        mode = "eager" if engine.enforce_eager else "compiled"
        shown = [f"TP={engine.tensor_parallel_size}", mode, self.recipe.dtype.value]
        shown += [f"{field}={value}" for field, value in self.changes if field not in _DESCRIBED]
        return f"{self.recipe.name} ({', '.join(shown)}), batch {self.batch}"

    def identity(self) -> dict[str, Any]:
        """What decides a side's answers (a resume must find it unchanged): recipe identity or URL, and the batch."""
        what = self.recipe.identity() if self.recipe is not None else {"url": self.url}
        return {"what": stable_hash(what), "batch": self.batch}

    def to_dict(self) -> dict[str, Any]:
        recipe = self.recipe.model_dump(mode="json") if self.recipe is not None else None
        return {
            "label": self.label,
            "description": self.describe(),
            "batch": self.batch,
            "url": self.url,
            "changes": {field: value for field, value in self.changes},
            "trace": str(self.trace) if self.trace is not None else None,
            "recipe": recipe,
        }


def apply_changes(recipe: ServingRecipe, changes: tuple[tuple[str, Any], ...]) -> ServingRecipe:
    """`recipe` with each (dotted field, value) applied; `engine.X` / `env.X` merge into the recipe's own."""
    merged: dict[str, Any] = {}
    for field, value in changes:
        head, dot, tail = field.partition(".")
        if dot and head in _NESTED:
            merged.setdefault(head, {})[tail] = value
        elif dot:
            raise WorkbenchError(f"recipe field {field!r}: only engine.* and env.* are nested; e.g. engine.block_size")
        else:
            merged[head] = value
    if not merged:
        return recipe
    try:
        return recipe.with_overrides(**merged)
    except WorkbenchError as exc:
        raise WorkbenchError(f"changes on recipe {recipe.name}: {exc}") from None


def same_server(a: Side, b: Side) -> bool:
    """Whether both sides are answered by one server (a batch twin, or an A/A twin of one configuration)."""
    if a.url is not None or b.url is not None:
        return a.url == b.url
    return a.recipe.identity() == b.recipe.identity()  # type: ignore[union-attr]


__all__ = ["LABELS", "Side", "apply_changes", "same_server"]
