"""The accuracy API: what `compare-ops`, `dump`, `compare-dumps` and notebooks 04, 05 and 10 call.

result = run_compare_ops(CompareOpsRequest(repros=ReproExport.WORST))  # every op vs float32 (§8, §15) + repro
capture_dump(model, inputs, out)                       # per-module outputs of one forward pass
capture_engine_dump("cpu-tiny", prompt, out, steps=4)  # the same inside a recipe's vLLM engine
compare_dumps(test_dir, reference_dir)                 # module by module, first divergence, NaN origin
compare_layers(capture_executor(...), capture_reference(...))  # the backend's executor vs transformers
"""

from __future__ import annotations

from workbench.accuracy.compare_ops import CompareOpsRequest, CompareOpsResult, ReproExport, run_compare_ops
from workbench.accuracy.dump import capture_dump, load_causal_lm, tokenize_prompt
from workbench.accuracy.dump_compare import compare_dumps
from workbench.accuracy.dump_serving import capture_engine_dump, capture_reference_for
from workbench.accuracy.layer_compare import (
    FaultRequest,
    capture_executor,
    capture_reference,
    headline,
    layer_curves,
    prompt_ids,
    verdict_table,
)
from workbench.accuracy.layer_compare import compare as compare_layers
from workbench.accuracy.opsuite import case_detail, describe_failure, worst_case

__all__ = [
    "CompareOpsRequest",
    "CompareOpsResult",
    "ReproExport",
    "FaultRequest",
    "capture_dump",
    "capture_engine_dump",
    "capture_executor",
    "capture_reference",
    "capture_reference_for",
    "run_compare_ops",
    "case_detail",
    "compare_dumps",
    "compare_layers",
    "describe_failure",
    "headline",
    "layer_curves",
    "load_causal_lm",
    "prompt_ids",
    "tokenize_prompt",
    "verdict_table",
    "worst_case",
]
