"""Layer-by-layer comparison of the backend's executor against a float32 reference (notebook 05).

docs/METHOD.md §8's recipe for wrong answers or NaN: run the same prompt on CPU in float32 as the per-layer
baseline, compare layer by layer, and pinpoint the operator. Here:

- reference: Hugging Face transformers on the checkpoint, float32, CPU (an independent implementation);
- test: `ascend_backend`'s executor on the chosen device and dtype — the code path an NPU bring-up runs —
  optionally with a fault injected into one op of one module, to see the tools find it.

Both dumps carry HF module names (the executor mirrors them), so they line up by name; the comparison
reports the first diverging module and the NaN origin.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import torch

from ascend_backend.registry import REGISTRY, attach_module_names
from workbench.accuracy.dump import capture_dump, load_causal_lm, tokenize_prompt
from workbench.accuracy.dump_compare import DumpComparison, compare_dumps
from workbench.stack.dtypes import dtype_name, parse_dtype

# Module outputs worth comparing: embedding, each layer's norms, attention, MLP and output, final norm, head.
DEFAULT_PATTERNS = (
    "model.embed_tokens",
    "model.layers.*.input_layernorm",
    "model.layers.*.self_attn",
    "model.layers.*.post_attention_layernorm",
    "model.layers.*.mlp",
    "model.layers.?",
    "model.layers.??",
    "model.norm",
    "lm_head",
)


@dataclass(frozen=True)
class FaultRequest:
    """Inject `kind` into `op` while the module matching `module` runs (see registry.inject)."""

    op: str
    kind: str
    module: str | None = None
    factor: float = 1.01


def capture_reference(
    model_dir: Path, prompt_ids: Sequence[int], out_dir: Path, patterns: Sequence[str] = DEFAULT_PATTERNS
) -> Path:
    """transformers, float32, CPU: the per-layer baseline."""
    model = load_causal_lm(model_dir, torch.float32, "cpu")
    capture_dump(
        model,
        {"input_ids": torch.tensor([list(prompt_ids)])},
        out_dir,
        module_patterns=patterns,
        prompt_token_ids=prompt_ids,
        model_description=f"transformers float32 cpu: {model_dir.name}",
    )
    return out_dir


def capture_executor(
    model_dir: Path,
    prompt_ids: Sequence[int],
    out_dir: Path,
    *,
    dtype: str = "float32",
    device: str = "cpu",
    fault: FaultRequest | None = None,
    patterns: Sequence[str] = DEFAULT_PATTERNS,
) -> Path:
    """ascend_backend's executor on `device` in `dtype`, optionally with one injected fault."""
    from ascend_backend.models import Executor
    from ascend_backend.models.executor import default_block_size

    torch_dtype = parse_dtype(dtype)
    # the device's own block size (128 on an NPU, where the paged-prefill kernels require it), 2048 tokens in all
    block = default_block_size(device)
    executor = Executor.from_pretrained(
        model_dir, device=device, dtype=torch_dtype, block_size=block, num_blocks=max(2, 2048 // block)
    )
    handles = attach_module_names(executor.model)  # so module-limited faults know where they are
    description = f"ascend_backend executor {dtype_name(torch_dtype)} {device}: {model_dir.name}"
    try:
        if fault is None:
            capture_dump(
                executor.model,
                list(prompt_ids),
                out_dir,
                module_patterns=patterns,
                prompt_token_ids=prompt_ids,
                model_description=description,
                forward=lambda _model, ids: executor.prompt_logits(ids),
            )
        else:
            with REGISTRY.inject(fault.op, fault=fault.kind, module=fault.module, factor=fault.factor):
                capture_dump(
                    executor.model,
                    list(prompt_ids),
                    out_dir,
                    module_patterns=patterns,
                    prompt_token_ids=prompt_ids,
                    model_description=description + f" + fault {fault}",
                    forward=lambda _model, ids: executor.prompt_logits(ids),
                )
    finally:
        for handle in handles:
            handle.remove()
    return out_dir


def compare(test_dir: Path, reference_dir: Path) -> DumpComparison:
    # HF has modules the executor folds away (rotary_emb, act_fn): compare the common ones.
    return compare_dumps(test_dir, reference_dir, allow_missing=True)


def prompt_ids(model_dir: Path, prompt: str) -> list[int]:
    return tokenize_prompt(model_dir, prompt)


def layer_curves(comparison: DumpComparison) -> go.Figure:
    """Cosine and max abs error per module in execution order; first divergence and NaN origin marked."""
    table = comparison.table
    summary = comparison.summary
    keys = table["key"].tolist()
    x = list(range(len(keys)))  # execution order; the module name is in the hover, layers on the axis
    fig = go.Figure()
    hover = "%{customdata}<br>%{y:.6g}<extra>%{fullData.name}</extra>"
    fig.add_scatter(x=x, y=table["cosine"], name="cosine", mode="lines+markers", customdata=keys, hovertemplate=hover)
    fig.add_scatter(
        x=x,
        y=table["max_abs_err"],
        name="max abs error",
        mode="lines+markers",
        yaxis="y2",
        customdata=keys,
        hovertemplate=hover,
    )
    for key, label, colour in (
        (summary.first_divergence, "first divergence", "#d4a72c"),
        (summary.nan_origin, "NaN origin", "#cf222e"),
    ):
        if key is not None and key in keys:
            fig.add_vline(x=keys.index(key), line_color=colour, line_dash="dash")
            fig.add_annotation(
                x=keys.index(key),
                y=1.0,
                yref="paper",
                text=f"{label}: {key}",
                showarrow=False,
                font={"color": colour},
                xanchor="left",
            )
    ticks = layer_ticks(keys)
    fig.update_layout(
        title="Per-module agreement with the float32 reference",
        xaxis={"title": "module, in execution order", "tickvals": list(ticks), "ticktext": list(ticks.values())},
        yaxis={"title": "cosine"},
        yaxis2={
            "title": "max abs error",
            "overlaying": "y",
            "side": "right",
            "type": "log",
            "dtick": 1,
            "exponentformat": "power",
        },
        height=480,
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


_LAYER = re.compile(r"\blayers\.(\d+)\.")


def layer_ticks(keys: list[str], most: int = 12) -> dict[int, str]:
    """Axis ticks for a list of module names: the first module of every few decoder layers ('layer 10'), so
    at most about `most` labels stand on the axis whatever the depth.

    ["model.embed_tokens", "model.layers.0.input_layernorm", ..., "model.layers.1.mlp", ...] -> {1: "layer 0", ...}
    """
    first: dict[int, int] = {}
    for index, key in enumerate(keys):
        match = _LAYER.search(key)
        if match is not None:
            first.setdefault(int(match.group(1)), index)
    if not first:
        return {}
    step = max(1, -(-len(first) // most))  # ceil: 30 layers, 12 labels -> every 3rd layer
    return {index: f"layer {layer}" for layer, index in sorted(first.items()) if layer % step == 0}


def verdict_table(comparison: DumpComparison) -> pd.DataFrame:
    columns = [
        c
        for c in (
            "key",
            "verdict",
            "cosine",
            "max_abs_err",
            "max_rel_err",
            "one_thousandth_ratio",
            "test_nan_count",
            "test_inf_count",
            "reason",
        )
        if c in comparison.table.columns
    ]
    return comparison.table[columns]


def headline(comparison: DumpComparison) -> pd.DataFrame:
    s = comparison.summary
    rows = [
        ("modules compared", s.compared),
        ("pass / warning / error", f"{s.passed} / {s.warnings} / {s.errors}"),
        ("first divergence", s.first_divergence or "none"),
        ("why", s.first_divergence_reason or "-"),
        ("NaN origin", s.nan_origin or "none"),
        ("worst cosine", f"{s.worst_cosine:.6f} at {s.worst_cosine_key}"),
    ]
    return pd.DataFrame(rows, columns=["", "value"])
