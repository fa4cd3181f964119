"""A plan on the served engine: held-out accuracy and throughput beside the float and all-int8 models.

    table = compare_served(result, "cpu-smollm2", "cpu-smollm2-w8a8")    # notebook 10, step 4

One server per configuration, one at a time, each stopped before the next starts (float and all-int8 are
the shipped recipes; the plan is written as compressed-tensors and served with the float recipe's
settings). On each: the held-out texts' NLL from prompt logprobs (`evaluators.score_served`),
then a fixed load (`serving.load`, `vllm bench serve`'s definitions). Rows: configuration, what served
it, held-out NLL rise over float with its 95% interval, output tokens/s, mean TTFT and TPOT, and the
throughput ratio to float (also written to `served.json` in the state directory). One pass each: `benchmarks/bench_quant_autopilot.py throughput` alternates
pairs for numbers to quote.
"""

from __future__ import annotations

import pandas as pd

from ascend_backend.quantization.scheme import PlanScheme
from workbench.errors import WorkbenchError
from workbench.quantize.autopilot import AutoResult
from workbench.quantize.evaluators import ServedEvaluator, score_served
from workbench.quantize.stats import nll_rise

SERVED_FILE = "served.json"  # the table, in the autopilot's state directory
# One wave of eight sequences: float bf16 SmolLM2 decodes at 2.5-9 tok/s on a 2-core AVX2 CPU (the low end beside
# the test session), so 16 x 32 tokens cost the main job ~200 s on float alone; the benchmark quotes the figures.
DEFAULT_WORKLOAD = {"input_len": 128, "output_len": 16, "num_prompts": 8, "concurrency": 8}


def compare_served(
    result: AutoResult,
    float_recipe: str,
    int8_recipe: str | None = None,
    *,
    workload: dict | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Float, all-int8 (`int8_recipe`, when given) and the plan, each served once (see the module docstring)."""
    from workbench.embedded_models.catalog import resolve_model
    from workbench.recipes import load_serving_recipe
    from workbench.serving.load.runner import run_load
    from workbench.serving.load.workload import Workload
    from workbench.serving.server import launch

    if result.scored is None:
        raise WorkbenchError("this result holds no texts (read back from plan.json?): run the autopilot again")
    if any(scheme not in ("W8A8_DYNAMIC", "FLOAT") for scheme in result.units.values()):
        raise WorkbenchError(
            "this machine serves W8A8_DYNAMIC and FLOAT at speed (static int8 takes ~1 s a call "
            "on vLLM's CPU kernel): search with ladder W8A8_DYNAMIC,FLOAT to serve the plan"
        )
    base = load_serving_recipe(float_recipe)
    evaluator = ServedEvaluator(
        base, resolve_model(result.model), result.unit_list, result.state_dir / "served", progress=progress
    )
    configurations = [("float", base)]
    if int8_recipe:
        configurations.append(("all-int8", load_serving_recipe(int8_recipe)))
    plan = {u: PlanScheme(s) for u, s in result.units.items()}
    configurations.append(("plan", evaluator.recipe_for(plan)))
    load = Workload(**{**DEFAULT_WORKLOAD, **(workload or {})})
    test = list(result.scored.test)
    rows, reference = [], None
    for label, recipe in configurations:
        # Each server stopped before the next starts: three idle SmolLM2 servers beside the notebook's executor
        # model and the test session's engines ran a 24 GiB machine out of memory (6 Dec, a worker OOM-killed).
        with launch(recipe, progress=progress, pooled=False) as server:
            losses = score_served(server.url, server.model, test, concurrency=4, progress=progress)
            summary = run_load(server.url, server.model, load, progress=progress).summary
        reference = reference or losses
        rise = nll_rise(losses, reference, sum(t.scored for t in test))
        rows.append(
            {
                "configuration": label,
                "recipe": recipe.name,
                "held_out_rise_pct": rise.percent,
                "ci_low": rise.low,
                "ci_high": rise.high,
                "output_tok_s": summary.output_throughput,
                "mean_ttft_ms": summary.ttft_ms["mean"],
                "mean_tpot_ms": summary.tpot_ms["mean"],
                "failed_requests": summary.failed,
            }
        )
    table = pd.DataFrame(rows)
    table["throughput_vs_float"] = table["output_tok_s"] / table.loc[0, "output_tok_s"]
    from workbench.results.envelope import DocumentKind, write_result
    from workbench.stack.provenance import provenance

    write_result(
        result.state_dir / SERVED_FILE,
        {"workload": dict(vars(load)) | {"slo": None}, "rows": table.to_dict(orient="records")},
        provenance(),
        DocumentKind("quantize-served"),
    )
    return table
