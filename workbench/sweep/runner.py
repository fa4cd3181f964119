"""Run a sweep: measure every point the results store does not hold yet, then say what was done.

Where the points are measured is the `Execution`'s choice, and only that changes:

- serial (the default): one server configuration after another, each server on all of the machine;
- `parallel=N` / `'auto'` (`--parallel`): configurations at once, one server per device group of this
  machine (`workbench.serving.device_groups`, `workbench.sweep.parallel`);
- `ray=ADDRESS` / `'local'` (`--ray`): each configuration is a Ray task on whichever node has a free
  group (`workbench.sweep.ray_executor`).

What a point is and how it is measured lives in `workbench.sweep.measure` (server start, warm-up,
load under the /metrics sampler, profile when the spec asks for one). In every mode this runner, in
the caller's thread, is the store's only writer: workers hand their points back and it appends each
one atomically as it arrives. So points already in the store are skipped, an interrupted sweep
reruns only what is missing, and every server's orphan guard (`workbench.serving.reaper`) stops it
even if this process is SIGKILLed (during its start too).
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from workbench.recipes import DeviceKind
from workbench.serving.device_groups import DevicePool, local_pool, numa_groups
from workbench.sweep.interference import CONFIRM_FILE, points_to_confirm
from workbench.sweep.measure import ConfigMeasurer, Mode
from workbench.sweep.spec import SweepPoint, SweepSpec, expand, load_base_recipe
from workbench.sweep.store import PointResult, ResultStore

RESULTS_FILE = "results.jsonl"


@dataclass(frozen=True)
class Execution:
    """How a sweep runs its server configurations.

    parallel:        None = one at a time; 0 = 'auto' (NPU/GPU: as many as the cards allow; CPU: one
                     group per NUMA node); N = N device groups (CPU: the cores split N ways)
    ray:             a Ray cluster address, or 'local' to start one here (CPU: `parallel` groups)
    devices:         NPU/GPU ids to hand out (default: ASCEND_RT_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES,
                     else every card the runtime counts)
    kv_budget_bytes: CPU: the KV-cache bytes split between concurrent servers (default: half the
                     available memory)
    retries:         Ray: how often a configuration whose worker or node died is resubmitted
    """

    parallel: int | None = None
    ray: str | None = None
    devices: tuple[int, ...] = ()
    kv_budget_bytes: int | None = None
    retries: int = 1

    @property
    def mode(self) -> Mode:
        if self.ray is not None:
            return Mode.RAY
        return Mode.SERIAL if self.parallel is None else Mode.PARALLEL


SERIAL = Execution()


@dataclass(frozen=True)
class SweepOutcome:
    """What one `run_sweep` call did. `results` holds every point of the sweep, old and new."""

    spec_name: str
    store_path: Path
    measured: tuple[str, ...]  # point ids measured (or recorded as failed) by this call
    skipped: tuple[str, ...]  # point ids already in the store
    missing: tuple[str, ...]  # point ids still not in the store (their server died mid-group)
    results: tuple[PointResult, ...]
    wall_s: float
    mode: str = Mode.SERIAL.value


class SweepRunner:
    """Measures points into one store; holds the progress bar and decides where configurations run.

    Mutable by nature (a live progress bar, a store being appended to); one instance per sweep run.
    `on_point` is called with each stored result (the notebook's live table, tests' kill switch).
    """

    def __init__(
        self,
        spec: SweepSpec,
        out_dir: Path,
        *,
        progress: bool = True,
        extra_env: Mapping[str, str] | None = None,
        on_point: Callable[[PointResult], None] | None = None,
        execution: Execution = SERIAL,
        store_name: str = RESULTS_FILE,
        mode: Mode | None = None,
    ):
        self.spec = spec
        self.out_dir = Path(out_dir).resolve()  # Ray tasks and servers run from other working directories
        self.store = ResultStore(self.out_dir / store_name)
        self.progress = progress
        self.extra_env = dict(extra_env or {})
        self.on_point = on_point
        self.execution = execution
        self.measurer = ConfigMeasurer(spec, self.out_dir, self.extra_env, mode or execution.mode)
        self.bar: Any = None  # set while run_points measures

    # -- the public entry ----------------------------------------------------------------------

    def run_points(self, points: Sequence[SweepPoint]) -> list[PointResult]:
        """Measure the points not yet in the store (grouped by server); return all of them, in order."""
        stored = {r.point_id: r for r in self.store.read()}
        todo = [p for p in points if p.point_id not in stored]
        if not todo:
            return [stored[p.point_id] for p in points]
        configs = [list(group) for _, group in itertools.groupby(todo, key=lambda p: p.server_key)]
        self.bar = tqdm(
            total=len(points),
            initial=len(points) - len(todo),
            desc=f"sweep {self.spec.name}",
            unit="point",
            disable=not self.progress,
        )
        try:
            for result in self._execute(configs):
                stored[result.point_id] = self._store(result)
        finally:
            self.bar.close()
            self.bar = None
        return [stored[p.point_id] for p in points if p.point_id in stored]

    # -- where configurations run --------------------------------------------------------------

    def _execute(self, configs: list[list[SweepPoint]]) -> Iterator[PointResult]:
        """Every point of `configs`, from wherever the execution runs them, in the order they finish."""
        execution, kind = self.execution, configs[0][0].recipe.device
        if execution.ray is not None:
            from workbench.sweep.ray_executor import ray_cluster, run_on_ray

            groups = execution.parallel or numa_groups(sorted(os.sched_getaffinity(0)))
            with ray_cluster(execution.ray, cpu_groups=groups) as ray:
                yield from run_on_ray(
                    ray,
                    self.measurer,
                    configs,
                    address=execution.ray,
                    retries=execution.retries,
                    kv_budget_bytes=execution.kv_budget_bytes,
                    status=self._status,
                )
        elif execution.parallel is not None:
            from workbench.sweep.parallel import run_parallel

            yield from run_parallel(self.measurer, configs, self._pool(kind), status=self._status)
        else:
            for points in configs:
                yield from self.measurer.results(points, None, status=self._status)

    def _pool(self, kind: DeviceKind) -> DevicePool:
        execution = self.execution
        return local_pool(
            kind,
            execution.parallel or 0,
            dict(os.environ),
            cores=sorted(os.sched_getaffinity(0)),
            devices=execution.devices,
            kv_budget_bytes=execution.kv_budget_bytes,
        )

    def _store(self, result: PointResult) -> PointResult:
        self.store.append(result)
        if self.bar is not None:
            self.bar.update(1)
        if self.on_point is not None:
            self.on_point(result)
        return result

    def _status(self, text: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(text[:90], refresh=True)


def run_sweep(
    spec: SweepSpec,
    out_dir: Path,
    *,
    progress: bool = True,
    extra_env: Mapping[str, str] | None = None,
    on_point: Callable[[PointResult], None] | None = None,
    execution: Execution = SERIAL,
) -> SweepOutcome:
    """Run every point of `spec` that `out_dir/results.jsonl` does not hold yet, as `execution` says."""
    began = time.monotonic()
    points = expand(spec, load_base_recipe(spec))
    runner = SweepRunner(spec, out_dir, progress=progress, extra_env=extra_env, on_point=on_point, execution=execution)
    before = runner.store.done_ids()
    results = runner.run_points(points)
    present = {r.point_id for r in results}
    return SweepOutcome(
        spec_name=spec.name,
        store_path=runner.store.path,
        measured=tuple(p.point_id for p in points if p.point_id in present and p.point_id not in before),
        skipped=tuple(p.point_id for p in points if p.point_id in before),
        missing=tuple(p.point_id for p in points if p.point_id not in present),
        results=tuple(results),
        wall_s=time.monotonic() - began,
        mode=execution.mode.value,
    )


@dataclass(frozen=True)
class ConfirmOutcome:
    """What `confirm_best` did: the best points re-measured alone, and those that had run alone already."""

    rerun: tuple[str, ...]
    already_alone: tuple[str, ...]
    confirmations: tuple[PointResult, ...]  # every point of confirm.jsonl (this call's and earlier ones)

    def summary(self) -> str:
        return (
            f"confirm-best: {len(self.rerun)} best points re-measured alone, {len(self.already_alone)} had "
            "run alone already"
        )


def confirm_best(
    spec: SweepSpec, out_dir: Path, k: int, *, progress: bool = True, extra_env: Mapping[str, str] | None = None
) -> ConfirmOutcome:
    """Re-measure alone (serially) the best `k` rows' points that ran side by side; resumable like a sweep.

    The alone numbers go to out_dir/confirm.jsonl (same format as results.jsonl, mode 'confirm'), so the
    sweep's own results are never rewritten; the report sets the two side by side.
    """
    results = ResultStore(Path(out_dir) / RESULTS_FILE).read()
    rerun, alone = points_to_confirm(results, spec.slo.limits(), k)
    wanted = set(rerun)
    runner = SweepRunner(
        spec, out_dir, progress=progress, extra_env=extra_env, store_name=CONFIRM_FILE, mode=Mode.CONFIRM
    )
    runner.run_points([p for p in expand(spec, load_base_recipe(spec)) if p.point_id in wanted])  # sweep order
    return ConfirmOutcome(tuple(rerun), tuple(alone), tuple(runner.store.read()))
