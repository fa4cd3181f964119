"""Tables and figures of a quantized checkpoint, for notebook 10: what was quantized, ranges, round trip.

layer_table(out)        one row per decoder projection: scheme, calibrated input range (static)
range_figure(out)       the calibrated input span per layer, log scale (outlier layers stand out)
description_counts(out) msmodelslim: how many tensors the description marks W8A8 / W8A8_DYNAMIC / FLOAT
round_trip(out, tmp)    read the checkpoint, write it again in the same layout, compare tensor by tensor
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
        fig.add_scatter(x=rows["decoder_layer"], y=rows["span"], mode="markers", name=kind, customdata=rows["layer"],
                        hovertemplate="%{customdata}: span %{y:.4g}<extra></extra>")  # fmt: skip
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
