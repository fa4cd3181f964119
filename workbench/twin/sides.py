"""The two sides of a twin run: a serving recipe (launched) or a URL (attached), and how prompts are batched.

A side varies the configuration in one of three ways, which combine:
- another recipe (`--recipe cpu-tiny --recipe my-tp2.yaml`), or the same one twice;
- settings on one side (`--set B:engine.tensor_parallel_size=2`, `--set B:engine.enforce_eager=false`,
  `--set B:env.ASCEND_BACKEND_FAULT=silu_and_mul:scale:factor=1.1`): a dotted recipe field and a YAML value,
  applied with the recipe's own `with_overrides` and validated like the file;
- the batch (`--batch 1 16`): prompts per request, so the same server answers each prompt alone on one
  side and inside a full batch on the other (batch invariance).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from workbench.errors import WorkbenchError
from workbench.recipes import ServingRecipe

LABELS = ("A", "B")
_NESTED = ("engine", "env")
_SHOWN = ("engine.tensor_parallel_size=", "engine.enforce_eager=", "dtype=")  # described by their effect


@dataclass(frozen=True)
class Side:
    """One side: exactly one of `recipe` (launched, settings applied) and `url` (attached), and its batch."""

    label: str
    recipe: ServingRecipe | None = None
    url: str | None = None
    batch: int = 1
    settings: tuple[str, ...] = ()  # the --set texts applied to the recipe, as the user wrote them

    def __post_init__(self) -> None:
        if (self.recipe is None) == (self.url is None):
            raise WorkbenchError(f"side {self.label}: give exactly one of a recipe or a URL")

    @property
    def launched(self) -> bool:
        return self.recipe is not None

    def describe(self) -> str:
        """'cpu-tiny (TP=2, eager, float32), batch 16'; other --set fields are listed after the dtype."""
        if self.recipe is None:
            return f"{self.url}, batch {self.batch}"
        engine = self.recipe.engine
        shown = [f"TP={engine.tensor_parallel_size}", "eager" if engine.enforce_eager else "compiled",
                 self.recipe.dtype.value]  # fmt: skip
        shown += [text.split(":", 1)[1] for text in self.settings if not text.split(":", 1)[1].startswith(_SHOWN)]
        return f"{self.recipe.name} ({', '.join(shown)}), batch {self.batch}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label, "description": self.describe(), "batch": self.batch, "url": self.url,
            "settings": list(self.settings),
            "recipe": self.recipe.model_dump(mode="json") if self.recipe is not None else None,
        }  # fmt: skip


def parse_setting(text: str) -> tuple[str, str, Any]:
    """'B:engine.enforce_eager=false' -> ('B', 'engine.enforce_eager', False); the value is YAML."""
    side, sep, rest = text.partition(":")
    field, eq, value = rest.partition("=")
    if not sep or side.upper() not in LABELS or not eq or not field.strip():
        raise WorkbenchError(
            f"--set {text!r}: write SIDE:FIELD=VALUE with SIDE A or B, e.g. --set B:engine.tensor_parallel_size=2 "
            "or --set B:env.ASCEND_BACKEND_FAULT=silu_and_mul:scale:factor=1.1"
        )
    try:
        parsed = yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError:
        parsed = value
    return side.upper(), field.strip(), parsed


def apply_settings(recipe: ServingRecipe, settings: Sequence[tuple[str, Any]]) -> ServingRecipe:
    """`recipe` with each (dotted field, value) applied; `engine.X` / `env.X` merge into the recipe's own."""
    changes: dict[str, Any] = {}
    for field, value in settings:
        head, dot, tail = field.partition(".")
        if dot and head in _NESTED:
            changes.setdefault(head, {})[tail] = value
        elif dot:
            raise WorkbenchError(f"--set ...:{field}: only engine.* and env.* are nested; e.g. engine.block_size=64")
        else:
            changes[head] = value
    if not changes:
        return recipe
    try:
        return recipe.with_overrides(**changes)
    except WorkbenchError as exc:
        raise WorkbenchError(f"--set on recipe {recipe.name}: {exc}") from None


def make_sides(
    sources: Sequence[tuple[str, str]],
    load_recipe,
    *,
    settings: Sequence[str] = (),
    batches: Sequence[int] = (1,),
) -> tuple[Side, Side]:
    """Sides A and B from ('recipe' | 'url', value) pairs in the order given (one recipe: both sides run it).

    `load_recipe` reads a recipe name or file (the one serving-recipe reader); `batches` holds one value
    for both sides or one per side.
    """
    if not 1 <= len(sources) <= 2:
        raise WorkbenchError(
            f"a twin run has two sides; give --recipe/--url once (both sides run it) or twice, not {len(sources)} times"
        )
    if len(sources) == 1:
        if sources[0][0] == "url" and not settings and len(set(batches)) <= 1:
            raise WorkbenchError("one --url for both sides compares a server with itself; vary --batch, or give two")
        sources = [sources[0], sources[0]]
    if len(batches) not in (1, 2):
        raise WorkbenchError(f"--batch takes one value (both sides) or two (A then B), got {len(batches)}")
    per_side = list(batches) * 2 if len(batches) == 1 else list(batches)
    parsed = [parse_setting(s) for s in settings]
    sides = []
    for label, (kind, value), batch in zip(LABELS, sources, per_side, strict=False):
        mine = [(field, v) for side, field, v in parsed if side == label]
        texts = tuple(s for s, (side, _, _) in zip(settings, parsed, strict=True) if side == label)
        if kind == "url":
            if mine:
                raise WorkbenchError(f"--set {texts[0]!r}: side {label} is a URL; settings apply to recipes only")
            sides.append(Side(label, url=value, batch=batch))
        else:
            sides.append(Side(label, recipe=apply_settings(load_recipe(value), mine), batch=batch, settings=texts))
    return sides[0], sides[1]


def identity(side: Side) -> Mapping[str, Any]:
    """What decides a side's answers (for the resume check): recipe identity or URL, and the batch."""
    from workbench.recipes import stable_hash

    what = side.recipe.identity() if side.recipe is not None else {"url": side.url}
    return {"what": stable_hash(what), "batch": side.batch}


__all__ = ["LABELS", "Side", "apply_settings", "identity", "make_sides", "parse_setting"]
