"""The shipped CPU feature plan bisected end to end on real vLLM CPU servers, and what each feature costs.

    .venv/bin/python benchmarks/bench_feature_plan.py                       # recipes/features/cpu.yaml, cpu-tiny
    .venv/bin/python benchmarks/bench_feature_plan.py --recipe cpu-smollm2 --out runs/bench/plan

A long experiment (a server per step: about ten starts, one of them compiling the model), so it lives
here and not in the test suite; the integration tier bisects a plan of broken features instead, and
notebook 06 bisects two features of this plan. Every feature of the plan must pass on the embedded
model (exit 1 otherwise, naming the step). Measured per step: server start and probe time, and the
start time as a ratio of the baseline's start measured in the same run — what enabling the feature
costs at start-up (graph mode's compilation shows here).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from workbench.bisect.plan import load_plan
from workbench.bisect.runner import Bisect
from workbench.recipes import load_serving_recipe

REPO_ROOT = Path(__file__).resolve().parent.parent


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default="cpu-tiny", help="serving recipe (shipped name or path)")
    parser.add_argument("--plan", default=str(REPO_ROOT / "recipes/features/cpu.yaml"), help="feature plan YAML")
    parser.add_argument("--out", default=None, help="bisect directory (default: a temporary one)")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    recipe, plan = load_serving_recipe(args.recipe), load_plan(Path(args.plan))
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench-feature-plan-"))
    verdict = Bisect(recipe, plan, out).run(progress=True)
    baseline = next(r for r in verdict.records if r.kind == "baseline")
    print(f"\n{plan.name} on {recipe.name}: {verdict.status} - {verdict.message}  ({out})")
    print(f"{'step':<12} {'features':<48} {'start s':>8} {'x base':>7} {'probe s':>8}  result")
    for r in verdict.records:
        if r.kind == "skipped":
            continue
        ratio = r.start_s / baseline.start_s if baseline.start_s else float("nan")
        result = "pass" if r.passed else (r.crash_kind or r.match or "failed")
        print(
            f"{r.kind:<12} {'+'.join(r.features) or '-':<48} {r.start_s:8.1f} {ratio:7.2f} {r.probe_s:8.1f}  {result}"
        )
    kinds = {r.kind for r in verdict.records}
    if verdict.status != "all_pass" or not {"baseline", "alone", "cumulative"} <= kinds:
        print(f"FAILED: expected every feature of {args.plan} to pass; got {verdict.status}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
