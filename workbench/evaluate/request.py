"""An evaluation as one typed use case: what `ascend-workbench evaluate` and a notebook both run.

    request = EvaluateRequest(("humaneval", "text"), limit=40, reference=Path("runs/eval/float"))
    with connect(recipe=load_serving_recipe("cpu-smollm2-w8a8")) as server:
        result = run_evaluate(request, server)
    print(result.text()); result.failed

The request is checked before any server starts (a malformed data set, thresholds file or reference run
is named with its fix); the run measures, writes OUT/summary.json and compares with the reference.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.evaluate.datasets import load_dataset
from workbench.evaluate.report import (
    Comparison,
    DatasetSummary,
    compare_runs,
    read_run,
    summarize_run,
    write_summary,
)
from workbench.evaluate.runner import Settings, default_out_dir, evaluate_target, target_for
from workbench.evaluate.thresholds import load_thresholds
from workbench.recipes import ServingRecipe


@dataclass(frozen=True)
class EvaluateRequest:
    """datasets    names (humaneval, text) or JSONL files
    out         the result folder; None = runs/evaluate/<recipe or model>, resumed when rerun
    limit       the first N problems of each data set; None = all
    reference   an earlier run's folder to compare with (float vs W8A8)
    thresholds  a thresholds file or shipped name; None = policy/evaluate/thresholds.yaml"""

    datasets: tuple[str | Path, ...]
    out: Path | None = None
    limit: int | None = None
    reference: Path | None = None
    thresholds: str | None = None
    settings: Settings = field(default_factory=Settings)
    tokenizer: Path | None = None

    def __post_init__(self) -> None:
        if not self.datasets:
            raise WorkbenchError("--dataset: name at least one data set (humaneval, text or a JSONL file)")
        if self.limit is not None and self.limit < 1:
            raise WorkbenchError(f"--limit {self.limit}: give a positive number of problems (or leave it out for all)")
        for name in self.datasets:
            load_dataset(name)  # a malformed file fails here, before any server starts
        load_thresholds(self.thresholds)
        if self.reference is not None:
            read_run(self.reference)


@dataclass(frozen=True)
class EvaluateResult:
    out: Path
    summary_path: Path
    summaries: dict[str, DatasetSummary]
    comparison: Comparison | None

    @property
    def failed(self) -> bool:
        """A request failed, or the comparison with the reference is an error."""
        if any(summary.errors for summary in self.summaries.values()):
            return True
        verdict = self.comparison.verdict if self.comparison is not None else None
        return verdict is not None and verdict.value == "error"

    def text(self) -> str:
        lines = []
        for summary in self.summaries.values():
            row = summary.row()
            lines.append(
                f"{row['dataset']:>12s} on {row['model']}: NLL {row['nll_mean']:.4f} nats/token over "
                f"{row['nll_tokens']} tokens ({row['nll_problems']} problems), {row['completions']} completions, "
                f"pass@1 {row['passed']}/{row['executed']}, {row['errors']} failed requests"
            )
        if self.comparison is not None:
            lines.append(self.comparison.text())
        lines.append(f"results: {self.out}  summary: {self.summary_path}")
        return "\n".join(lines)


def run_evaluate(
    request: EvaluateRequest, server: Any, recipe: ServingRecipe | None = None, *, progress: bool = True
) -> EvaluateResult:
    """Measure `server` on the request's data sets, summarize, and compare with the reference."""
    target = target_for(server, recipe)
    out = Path(request.out) if request.out is not None else default_out_dir(target)
    datasets = [load_dataset(name) for name in request.datasets]
    evaluate_target(
        target,
        datasets,
        out,
        limit=request.limit,
        settings=request.settings,
        tokenizer_dir=request.tokenizer,
        progress=progress,
    )
    thresholds = load_thresholds(request.thresholds)
    comparison = compare_runs(request.reference, out, thresholds) if request.reference is not None else None
    return EvaluateResult(out, write_summary(out, comparison), summarize_run(out), comparison)
