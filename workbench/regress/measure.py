"""Repeated bench runs of one configuration: what a baseline and a `regress` check are made of.

One server per call (started from the recipe, stopped at the end, whatever happens), a short warm-up of
the same shape (the first requests of a fresh server pay for allocation and caches, which is start-up
cost, not the configuration's speed), then `repeats` runs of the workload, each saved as a bench JSON
(`ascend-workbench bench --json` format, provenance included) as soon as it finishes.

Configuration changes go into the recipe (`recipe.with_overrides(engine=..., env=...)`), not into the
launch environment, so the provenance stamp records them and `regress` can name them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.recipes import ServingRecipe
from workbench.serving.load.runner import run_load
from workbench.serving.load.workload import Workload

if TYPE_CHECKING:
    from workbench.serving.server import Server

WARMUP_REQUESTS = 4


def warmup_of(workload: Workload) -> Workload:
    """A few requests of the same lengths, all in flight at once."""
    count = min(WARMUP_REQUESTS, workload.num_prompts or WARMUP_REQUESTS)
    return Workload(
        input_len=workload.input_len,
        output_len=workload.output_len,
        num_prompts=count,
        concurrency=count,
        seed=workload.seed + 10_000,
    )


def repeat_runs(
    server: Server,
    recipe: ServingRecipe | None,
    workload: Workload,
    repeats: int,
    out_dir: Path | str,
    *,
    label: str = "run",
    progress: bool = True,
) -> list[Path]:
    """Warm up `server`, then run `workload` `repeats` times; each run saved as out_dir/<label>-<i>.json.

    Repeat i uses seed workload.seed + i: other prompts of the same shape, as a new day's traffic would.
    `recipe` is what the server was started from (it goes into the provenance stamp).
    """
    from tqdm.auto import tqdm

    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    run_load(server.url, server.model, warmup_of(workload), progress=False)
    paths = []
    for i in tqdm(range(repeats), desc=f"{label} repeats", unit="run", disable=not progress):
        result = run_load(
            server.url, server.model, replace(workload, seed=workload.seed + i), recipe=recipe, progress=False
        )
        paths.append(result.write(out / f"{label}-{i + 1}.json"))
    return paths


def measure_repeats(
    recipe: ServingRecipe,
    workload: Workload,
    repeats: int,
    out_dir: Path | str,
    *,
    label: str = "run",
    extra_env: Mapping[str, str] | None = None,
    log_dir: Path | None = None,
    progress: bool = True,
) -> list[Path]:
    """Serve `recipe` (stopped at the end, whatever happens) and `repeat_runs` on it.

    `extra_env` reaches the server only, not the stamp: use it for test-session markers, not settings.
    """
    from workbench.serving.server import launch

    with launch(recipe, extra_env=extra_env, log_dir=log_dir, progress=progress) as server:
        return repeat_runs(server, recipe, workload, repeats, out_dir, label=label, progress=progress)
