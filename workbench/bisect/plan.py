"""Feature plans: what each advanced feature means in engine arguments and environment, per target.

A plan (`recipes/features/*.yaml`) names a baseline with every advanced feature off, the features one
by one, and the recommended enabling order. Composing features is data work, done here and nowhere
else: engine fields merge in order, extra arguments concatenate, `compilation` fields merge into one
`--compilation-config` JSON (two features may both touch it), environment variables merge.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from workbench import settings
from workbench.errors import WorkbenchError
from workbench.recipes import EngineArgs, Frozen, ServingRecipe, load_recipe_file


class FeatureSpec(Frozen):
    """One switch: the engine fields, extra CLI args, compilation-config fields and env it sets."""

    name: str
    description: str = ""
    engine: dict[str, Any] = Field(default_factory=dict)
    extra_args: tuple[str, ...] = ()
    compilation: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    supported: bool = True
    unsupported_reason: str = ""
    # A switch the platform overrides: where it is forced (a source line, cited) and what that means.
    # Bisect skips a forced feature and labels the step with both.
    forced_by: str = ""
    forced_reason: str = ""

    @model_validator(mode="after")
    def _engine_fields_exist(self) -> FeatureSpec:
        unknown = set(self.engine) - set(EngineArgs.model_fields) - {"extra_args"}
        if unknown:
            name = sorted(unknown)[0]
            close = difflib.get_close_matches(name, list(EngineArgs.model_fields), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"feature {self.name!r}: unknown engine field {name!r}{hint}")
        if "extra_args" in self.engine:
            raise ValueError(f"feature {self.name!r}: put extra arguments in `extra_args`, not engine.extra_args")
        if not self.supported and not self.unsupported_reason:
            raise ValueError(f"feature {self.name!r}: supported: false needs an unsupported_reason")
        if bool(self.forced_by) != bool(self.forced_reason):
            raise ValueError(
                f"feature {self.name!r}: forced_by and forced_reason go together (the vllm-ascend file and tag that forces it, and what it does)"
            )
        return self


class CompareSpec(Frozen):
    """How outputs are compared with the baseline's greedy outputs."""

    prompts: tuple[str, ...] = (
        "The capital of France is",
        "def add(a, b):",
        "Once upon a time",
        "1, 2, 3, 4,",
    )
    max_tokens: int = Field(16, ge=1)
    top_logprobs: int = Field(5, ge=1, le=20)
    # nats: a greedy token may flip only where the baseline's top two were this close (a near tie), and
    # matching tokens may not move their logprob by more than this.
    logprob_tolerance: float = Field(0.05, gt=0)


class FeaturePlan(Frozen):
    name: str
    target: str  # "cpu" | "ascend" | "cuda": documentation and a guard against the wrong plan
    description: str = ""
    baseline: FeatureSpec
    features: tuple[FeatureSpec, ...]
    order: tuple[str, ...]
    compare: CompareSpec = CompareSpec()
    source: Path | None = Field(None, exclude=True)

    @model_validator(mode="after")
    def _order_names_features(self) -> FeaturePlan:
        names = [f.name for f in self.features]
        if len(set(names)) != len(names):
            raise ValueError(f"feature names repeat: {names}")
        for name in self.order:
            if name not in names:
                close = difflib.get_close_matches(name, names, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ValueError(f"order names {name!r}, which is not a feature{hint}")
        missing = [n for n in names if n not in self.order]
        if missing:
            raise ValueError(f"order leaves out {missing}: list every feature once")
        return self

    def subset(self, names: Sequence[str]) -> FeaturePlan:
        """The plan restricted to `names` (kept in the recommended order); unknown names are an error."""
        unknown = [n for n in names if n not in self.order]
        if unknown:
            raise WorkbenchError(f"feature(s) {unknown} are not in plan {self.name!r}; it has {list(self.order)}")
        order = tuple(n for n in self.order if n in names)
        return self.model_copy(update={"features": tuple(self.feature(n) for n in order), "order": order})

    def feature(self, name: str) -> FeatureSpec:
        return next(f for f in self.features if f.name == name)

    def ordered(self) -> list[FeatureSpec]:
        return [self.feature(n) for n in self.order]


def features_dir() -> Path:
    return settings.recipes_dir() / "features"


def default_plan_for(recipe: ServingRecipe) -> Path:
    target = (
        "cpu" if recipe.device.value == "cpu" else "ascend" if recipe.device.value == "npu" else recipe.device.value
    )
    path = features_dir() / f"{target}.yaml"
    if not path.is_file():
        raise WorkbenchError(f"no feature plan for target {target!r} ({path}); pass --features FILE")
    return path


def load_plan(path: str | Path) -> FeaturePlan:
    """Read and validate a feature plan; any problem is one WorkbenchError naming file and key."""
    path = Path(path)
    if not path.is_file():
        raise WorkbenchError(f"feature plan {path} not found; plans live in {features_dir()}")
    return load_recipe_file(FeaturePlan, path, what="feature plan", required="'baseline', 'features' and 'order'")


def compose(recipe: ServingRecipe, baseline: FeatureSpec, features: Sequence[FeatureSpec]) -> ServingRecipe:
    """The recipe with the baseline and then `features` applied in order (later ones win)."""
    engine: dict[str, Any] = {}
    extra: list[str] = list(recipe.engine.extra_args)
    compilation: dict[str, Any] = {}
    env: dict[str, str] = {}
    for spec in (baseline, *features):
        engine.update(spec.engine)
        extra += spec.extra_args
        compilation.update(spec.compilation)
        env.update(spec.env)
    if compilation:
        extra += ["--compilation-config", json.dumps(compilation, sort_keys=True)]
    try:
        return recipe.with_overrides(engine={**engine, "extra_args": tuple(extra)}, env=env)
    except WorkbenchError as exc:
        names = ", ".join(f.name for f in features) or "baseline"
        raise WorkbenchError(f"features [{names}] do not make a valid recipe: {exc}") from None
