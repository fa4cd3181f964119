"""The twin use cases: what `ascend-workbench twin` and notebooks 08 and 11 call, each with one typed request.

    a = Side.of_recipe("A", load_serving_recipe("cpu-tiny"))
    b = Side.of_recipe("B", load_serving_recipe("cpu-tiny"), {"engine.tensor_parallel_size": 2})
    result = run_twin(TwinRequest(a, b, num_prompts=8, settings=TwinSettings(max_tokens=16)))
    print(result.text())            # the token stage, then the module stage when it ran; saved as twin.json

    perf = run_perf_twin(PerfTwinRequest(a, b, workload=PerfWorkload(num_prompts=16)))
    print(perf.text())              # where B's extra time went, per request class; saved as perf-twin.json
    traffic = PerfWorkload.of_trace("runs/capture/prod", num_prompts=64)   # the service's own requests as the load

A request is checked once, when it is made (a WorkbenchError naming the field and the fix); the verb only turns
flags into a request and prints the result, so the verb and the notebooks run exactly the same sequence:
the token stage (`run.compare_sides`), the decision on the module stage (`locate`) and its merge into
`twin.json` live here, not at the edges.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.twin.charts import bucket_chart, cosine_by_kind_chart, divergence_chart
from workbench.twin.locate import locate, module_kind, worst_cosine_by_kind
from workbench.twin.located import LocateResult
from workbench.twin.perf.request import PerfTwinRequest, PerfWorkload, ProfileWindow
from workbench.twin.perf.result import PERF_TWIN_KIND, PerfTwinResult, read_perf_twin
from workbench.twin.perf.run import run_perf_twin
from workbench.twin.policy import TwinThresholds, load_thresholds
from workbench.twin.run import TWIN_KIND, TwinResult, TwinSettings, compare_sides, read_twin
from workbench.twin.sides import Side


@dataclass(frozen=True)
class TwinRequest:
    """One twin run: the same greedy prompts on two sides, then (when wanted) the module stage.

    locate: dump both sides at the first divergence and compare them module by module (both must be
    recipes); locate_prompt / locate_steps: dump this prompt for that many engine steps even without one.
    """

    side_a: Side
    side_b: Side
    prompts: str | Path = "text"  # a data set name (text, humaneval) or a JSONL file, as `evaluate --dataset`
    num_prompts: int | None = None
    settings: TwinSettings = TwinSettings()
    thresholds: str | Path | TwinThresholds | None = None
    tokenizer: Path | None = None  # for servers without /tokenize
    out: Path | None = None  # default runs/twin/<stamp>; an existing run resumes
    locate: bool = True
    locate_prompt: int | None = None
    locate_steps: int | None = None
    extra_env: tuple[tuple[str, str], ...] = ()
    extra_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.side_a.label, self.side_b.label) != ("A", "B"):
            raise WorkbenchError(f"sides {self.side_a.label}, {self.side_b.label}: give side A first, then side B")
        if self.num_prompts is not None and self.num_prompts < 1:
            raise WorkbenchError(f"--num-prompts {self.num_prompts}: compare at least one prompt")
        if self.locate_steps is not None and self.locate_prompt is None:
            raise WorkbenchError("--locate-steps goes with --locate-prompt N (the prompt to dump)")
        if self.locate_steps is not None and self.locate_steps < 1:
            raise WorkbenchError(f"--locate-steps {self.locate_steps}: dump at least one engine step")
        if self.locate_prompt is not None and self.locate_prompt < 0:
            raise WorkbenchError(f"--locate-prompt {self.locate_prompt}: prompts are numbered from 0")
        for side in (self.side_a, self.side_b):
            self.settings.for_side(side)  # the batch against the settings, before any server starts

    @property
    def env(self) -> Mapping[str, str]:
        return dict(self.extra_env)


def run_twin(request: TwinRequest, *, progress: bool = True) -> TwinResult:
    """The token stage, then the module stage when a prompt diverged (or one was named); saved as twin.json."""
    result = compare_sides(
        request.side_a,
        request.side_b,
        request.prompts,
        out=request.out,
        num_prompts=request.num_prompts,
        settings=request.settings,
        thresholds=request.thresholds,
        tokenizer=request.tokenizer,
        extra_env=request.env,
        extra_args=request.extra_args,
        progress=progress,
    )
    wanted = request.locate_prompt is not None or (
        request.locate and result.first_divergence(near_ties=True) is not None
    )
    if not wanted:
        return result
    if not all(side.launched for side in result.sides):
        skipped = replace(result, module_stage="a side is a URL; dump it where it runs (`ascend-workbench dump`)")
        skipped.write()
        return skipped
    located = locate(
        result,
        prompt=request.locate_prompt,
        steps=request.locate_steps,
        extra_env=request.env,
        extra_args=request.extra_args,
        progress=progress,
    )
    merged = replace(result, located=located)
    merged.write()
    return merged


__all__ = [
    "PERF_TWIN_KIND",
    "TWIN_KIND",
    "LocateResult",
    "PerfTwinRequest",
    "PerfTwinResult",
    "PerfWorkload",
    "ProfileWindow",
    "Side",
    "TwinRequest",
    "TwinResult",
    "TwinSettings",
    "TwinThresholds",
    "bucket_chart",
    "cosine_by_kind_chart",
    "divergence_chart",
    "load_thresholds",
    "module_kind",
    "read_perf_twin",
    "read_twin",
    "run_perf_twin",
    "run_twin",
    "worst_cosine_by_kind",
]
