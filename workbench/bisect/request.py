"""What a bisect is asked to do, checked once, and the one call that does it.

    request = BisectRequest.load("recipes/serving/cpu-tiny.yaml", only=("ascend_backend_plugin",))
    outcome = run_bisect(request)        # baseline, alone, cumulative, pairs; resumable in request.out_dir

`ascend-workbench bisect` turns its flags into a `BisectRequest` and notebook 06 builds the same request from
its parameters, so both run the same sequence (docs/METHOD.md §7): the plan narrowed to the chosen features,
the default folder, the resume guard, a probe that starts real servers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workbench.bisect.plan import FeaturePlan, default_plan_for, load_plan
from workbench.bisect.runner import (
    Bisect,
    BisectOutcome,
    StepRecord,
    check_resumable,
    default_out_dir,
    probe_with_server,
    recipe_fingerprint,
)
from workbench.errors import WorkbenchError
from workbench.recipes import ServingRecipe, load_serving_recipe
from workbench.serving.device_groups import DevicePool


@dataclass(frozen=True)
class BisectRequest:
    """recipe     the configuration whose features are bisected
    plan       the feature plan (recipes/features/<target>.yaml by default)
    only       the plan's features to test, in the plan's order; () = every feature
    out        the step log's folder; None = runs/bisect/<recipe>-<hash of recipe and plan>, resumed when rerun
    startup_timeout_s  seconds each server may take to start; None = the recipe's own"""

    recipe: ServingRecipe
    plan: FeaturePlan
    only: tuple[str, ...] = ()
    out: Path | None = None
    startup_timeout_s: float | None = None

    def __post_init__(self) -> None:
        if self.only:
            self.plan.subset(self.only)  # names the features the plan does not have
        if self.startup_timeout_s is not None and self.startup_timeout_s <= 0:
            raise WorkbenchError(f"--startup-timeout {self.startup_timeout_s}: give a positive number of seconds")

    @classmethod
    def load(cls, recipe: str | Path | ServingRecipe, features: str | Path | None = None, **fields) -> BisectRequest:
        """A request from a recipe (name or path) and a feature plan file (None: the recipe device's plan)."""
        serving = recipe if isinstance(recipe, ServingRecipe) else load_serving_recipe(recipe)
        return cls(serving, load_plan(features or default_plan_for(serving)), **fields)

    @property
    def chosen(self) -> FeaturePlan:
        return self.plan.subset(self.only) if self.only else self.plan

    @property
    def out_dir(self) -> Path:
        return Path(self.out) if self.out is not None else default_out_dir(self.recipe, self.chosen)


def run_bisect(
    request: BisectRequest,
    *,
    pool: DevicePool | None = None,
    on_step: Callable[[StepRecord], None] | None = None,
    progress: bool = True,
) -> BisectOutcome:
    """Run (or resume) the bisect: refuses a folder that holds another recipe's or plan's steps."""
    plan, out = request.chosen, request.out_dir
    check_resumable(out, recipe_fingerprint(request.recipe, plan))
    probe = probe_with_server(plan, startup_timeout_s=request.startup_timeout_s)
    return Bisect(request.recipe, plan, out, probe=probe, on_step=on_step, pool=pool).run(progress=progress)
