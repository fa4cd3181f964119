"""Tables and figures of a quantized checkpoint, for notebook 10: what was quantized, ranges, round trip.

layer_table(out)        one row per decoder projection: scheme, calibrated input range (static)
range_figure(out)       the calibrated input span per layer, log scale (outlier layers stand out)
description_counts(out) msmodelslim: how many tensors the description marks W8A8 / W8A8_DYNAMIC / FLOAT
round_trip(out, tmp)    read the checkpoint, write it again in the same layout, compare tensor by tensor

and of an autopilot result (`autopilot.AutoResult`):

sensitivity_figure(r)   the proxy's score per unit by decoder layer, units kept in float marked
steps_table(r)          every evaluation of the search: stage, float count, dev rise and interval, holds?
steps_figure(r)         the same as a chart: each step's interval against the budget
plan_table(r)           unit -> scheme, with the proxy's score and rank
accuracy_table(r)       noise floor, dev and held-out rise with their intervals, against the budget
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import torch

from ascend_backend.quantization import QuantFormat, checkpoint_format, compressed_tensors, msmodelslim, read_checkpoint
from ascend_backend.quantization.files import read_tensors
from workbench.errors import WorkbenchError
from workbench.quantize.checkpoint import REPORT_FILE


def _report(out: Path) -> dict:
    path = Path(out) / REPORT_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise WorkbenchError(
            f"{path} is missing or unreadable ({exc}); quantize the model with this workbench"
        ) from None


def layer_table(out: Path) -> pd.DataFrame:
    """Columns layer, type, min, max, span (span empty for layers without a calibrated range)."""
    table = pd.DataFrame(_report(out)["layers"])
    for column in ("min", "max"):
        if column not in table:
            table[column] = float("nan")
    table["span"] = table["max"] - table["min"]
    return table[["layer", "type", "min", "max", "span"]]


def range_figure(out: Path) -> go.Figure:
    """Calibrated input span (max - min) of every static layer in model order, one trace per projection kind."""
    table = layer_table(out).dropna(subset=["span"])
    fig = go.Figure()
    table["kind"] = table["layer"].str.rsplit(".", n=1).str[-1]
    table["decoder_layer"] = table["layer"].str.extract(r"\blayers\.(\d+)\.", expand=False).astype(float)
    for kind, rows in table.groupby("kind", sort=False):
        fig.add_scatter(
            x=rows["decoder_layer"],
            y=rows["span"],
            mode="markers",
            name=kind,
            customdata=rows["layer"],
            hovertemplate="%{customdata}: span %{y:.4g}<extra></extra>",
        )
    fig.update_layout(
        title="Calibrated activation span per layer (one int8 scale covers each)",
        yaxis={"type": "log", "title": "max - min of the layer's input", "dtick": 1, "exponentformat": "power"},
        xaxis_title="decoder layer",
    )
    return fig


def description_counts(out: Path) -> pd.DataFrame:
    """For an msmodelslim checkpoint: tensors per type in quant_model_description.json, and layers per type."""
    description = msmodelslim.read_description(Path(out))
    entries = msmodelslim.tensor_entries(description)
    tensors = Counter(entries.values())
    weights = Counter(v for k, v in entries.items() if k.endswith(".weight"))
    return pd.DataFrame(
        [{"type": t, "tensors": tensors[t], "weights": weights.get(t, 0)} for t in sorted(tensors)]
    ).assign(model_quant_type=description.get("model_quant_type"))


def round_trip(out: Path, scratch: Path) -> pd.DataFrame:
    """Read `out` (checked), write it again in its own layout into `scratch`, and compare every tensor."""
    out, scratch = Path(out), Path(scratch)
    fmt = checkpoint_format(out)
    if fmt is None:
        raise WorkbenchError(f"{out} is not a quantized checkpoint")
    model = read_checkpoint(out)
    scratch.mkdir(parents=True, exist_ok=True)
    if fmt is QuantFormat.MSMODELSLIM:
        msmodelslim.write(model, scratch)
    else:
        config = json.loads((out / "config.json").read_text(encoding="utf-8"))
        floats = list(config["quantization_config"]["ignore"])
        compressed_tensors.write(
            model,
            scratch,
            {k: v for k, v in config.items() if k != "quantization_config"},
            [f for f in floats if f != "lm_head"],
        )
    first, second = read_tensors(out).tensors, read_tensors(scratch).tensors
    rows = []
    for name in sorted(set(first) | set(second)):
        a, b = first.get(name), second.get(name)
        same = a is not None and b is not None and a.dtype == b.dtype and bool(torch.equal(a, b))
        rows.append({"tensor": name, "dtype": str(a.dtype if a is not None else b.dtype), "identical": same})
    return pd.DataFrame(rows)


def sensitivity_figure(result) -> go.Figure:
    """The proxy's score per unit (log scale), one trace per unit kind; units kept FLOAT drawn as open circles."""
    table = plan_table(result)
    fig = go.Figure()
    for kind, rows in table.groupby("kind", sort=False):
        kept = rows["scheme"] == "FLOAT"
        fig.add_scatter(
            x=rows["layer"],
            y=rows["score"],
            mode="markers",
            name=kind,
            customdata=rows[["unit", "scheme"]],
            marker={"symbol": ["circle-open" if k else "circle" for k in kept], "size": 9},
            hovertemplate="%{customdata[0]}: %{y:.4g} (%{customdata[1]})<extra></extra>",
        )
    fig.update_layout(
        title=f"Sensitivity by {result.proxy} (open: kept in float)",
        xaxis_title="decoder layer",
        yaxis={"type": "log", "title": result.proxy, "exponentformat": "power"},
    )
    return fig


def plan_table(result) -> pd.DataFrame:
    """unit, layer, kind, scheme, score (the proxy) and rank (1 = most sensitive)."""
    rank = {unit: i + 1 for i, unit in enumerate(result.order)}
    rows = []
    for unit in result.order:
        layer = int(unit.rsplit(".", 2)[-2]) if unit.rsplit(".", 2)[-2].isdigit() else -1
        rows.append(
            {
                "unit": unit,
                "layer": layer,
                "kind": unit.rsplit(".", 1)[-1],
                "rank": rank[unit],
                "scheme": result.units.get(unit, "-"),
                "score": result.sensitivity.get(unit),
            }
        )
    return pd.DataFrame(rows).sort_values(["layer", "kind"]).reset_index(drop=True)


def steps_table(result) -> pd.DataFrame:
    rows = [
        {
            "step": s.index,
            "stage": s.stage,
            "counts": str(s.counts),
            "float_units": s.counts[0],
            "rise_pct": s.rise.percent,
            "ci_low": s.rise.low,
            "ci_high": s.rise.high,
            "holds": s.holds,
            "seconds": round(s.seconds, 1),
            "cached": s.cached,
        }
        for s in result.steps
    ]
    return pd.DataFrame(rows)


def steps_figure(result) -> go.Figure:
    """Each search step's dev rise with its interval; the budget as a line."""
    table = steps_table(result)
    fig = go.Figure()
    if not table.empty:
        fig.add_scatter(
            x=table["step"],
            y=table["rise_pct"],
            mode="markers+text",
            name="dev rise",
            text=table["counts"],
            textposition="top center",
            error_y={
                "type": "data",
                "symmetric": False,
                "array": table["ci_high"] - table["rise_pct"],
                "arrayminus": table["rise_pct"] - table["ci_low"],
            },
            marker={"color": ["seagreen" if h else "firebrick" for h in table["holds"]]},
        )
    fig.add_hline(y=result.budget, line_dash="dash", annotation_text=f"budget {result.budget:g}%")
    fig.update_layout(
        title="The search: NLL rise on the dev split per step (labels: units per rung)",
        xaxis_title="step",
        yaxis_title="rise over float, % (95% interval)",
    )
    return fig


def accuracy_table(result) -> pd.DataFrame:
    rows = [
        ("noise floor (float vs float, dev)", result.noise),
        ("plan, dev split", result.dev),
        ("plan, held-out test split", result.test),
    ]
    return pd.DataFrame(
        [
            {
                "measure": name,
                "measured_by": result.measured,
                "rise_pct": r.percent,
                "ci_low": r.low,
                "ci_high": r.high,
                "texts": r.texts,
                "budget_pct": result.budget,
                "within_budget": r.high <= result.budget,
            }
            for name, r in rows
            if r is not None
        ]
    )
