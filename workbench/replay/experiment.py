"""The acceptance experiment (docs/METHOD.md §18): capture a service's traffic, replay it on itself and on
configurations with planted differences, and say for each which requests changed and how.

    report = run_experiment(ExperimentPlan(reference=load_serving_recipe("cpu-smollm2-tools"),
                                           planted=(load_serving_recipe("cpu-smollm2-tools-parser"),), out=dir))

1. the reference recipe is launched and its own traffic is played through the capture proxy
   (`workbench.replay.traffic`): conversations, tool calls, JSON-schema requests, completions, some sampled;
2. the trace is replayed on the reference itself: the configuration's own noise (`noise/`, judged at the
   policy's tolerances: its table says how far the configuration drifts from its own recording);
3. replayed on the reference once more, judged against that noise (`same/`): what the acceptance of an
   unchanged configuration looks like;
4. each planted configuration is launched and the trace replayed on it, judged against the noise.

Each step is a resumable run directory, so a killed experiment picks up where it stopped. Used by the long
test (`tests/integration/test_replay.py`), `benchmarks/bench_replay.py` and notebook 12 (with the tiny model).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.recipes import ServingRecipe
from workbench.replay.capture import CaptureRequest, capture_proxy
from workbench.replay.recorder import CaptureSettings
from workbench.replay.report import ReplayResult
from workbench.replay.run import ReplayRequest, run_replay
from workbench.replay.traffic import TrafficSpec, send_traffic
from workbench.serving.load.runner import run_coroutine
from workbench.serving.load.trace import TRACE_FILE
from workbench.serving.server import connect


@dataclass(frozen=True)
class ExperimentPlan:
    reference: ServingRecipe
    planted: tuple[ServingRecipe, ...]
    out: Path
    traffic: dict[str, Any] = field(default_factory=dict)  # TrafficSpec fields besides the model
    speed: float = 1.0
    extra_env: dict[str, str] = field(default_factory=dict)
    progress: bool = False


@dataclass(frozen=True)
class ExperimentReport:
    trace: Path
    noise: ReplayResult
    same: ReplayResult
    planted: dict[str, ReplayResult]

    def table(self) -> list[dict[str, Any]]:
        """One row per replay and request class: how many requests of each parity class."""
        rows = []
        for name, result in {"noise": self.noise, "same": self.same, **self.planted}.items():
            per_class: dict[str, Counter] = {}
            for verdict in result.verdicts:
                per_class.setdefault(verdict.request_class, Counter())[verdict.parity.value] += 1
            rows += [{"replay": name, "class": k, **dict(v)} for k, v in sorted(per_class.items())]
        return rows


def capture_traffic(plan: ExperimentPlan, out: Path) -> Path:
    """Launch the reference, play its clients through the proxy; the trace (kept when already captured)."""
    if (out / TRACE_FILE).is_file():
        return out
    with connect(recipe=plan.reference, progress=plan.progress, extra_env=plan.extra_env) as server:
        spec = TrafficSpec(server.model, **plan.traffic)
        with capture_proxy(CaptureRequest(server.url, out, port=0, settings=CaptureSettings())) as proxy:
            run_coroutine(send_traffic(proxy.url, spec))
    return out


def run_experiment(plan: ExperimentPlan) -> ExperimentReport:
    out = Path(plan.out)
    trace = capture_traffic(plan, out / "trace")
    common = {"speed": plan.speed, "progress": plan.progress, "extra_env": plan.extra_env}
    noise = run_replay(ReplayRequest(trace, recipe=plan.reference, out=out / "noise", **common))
    same = run_replay(ReplayRequest(trace, recipe=plan.reference, out=out / "same", noise=out / "noise", **common))
    planted = {
        recipe.name: run_replay(
            ReplayRequest(trace, recipe=recipe, out=out / recipe.name, noise=out / "noise", **common)
        )
        for recipe in plan.planted
    }
    return ExperimentReport(trace, noise, same, planted)


__all__ = ["ExperimentPlan", "ExperimentReport", "capture_traffic", "run_experiment"]
