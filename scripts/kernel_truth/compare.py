"""One cell compared: vllm-ascend's kernel against the table's, and the finding that says how they differ.

Kinds of disagreement: a different kernel, different arguments, a different tag (the table has
vllm-ascend's kernels but changes at another release), a missing condition, vllm-ascend's own kernel not
named by the row. A row's `differs` field acknowledges a deliberate difference.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from scripts.kernel_truth.arguments import argument_differences
from scripts.kernel_truth.cells import TagInfo
from scripts.kernel_truth.facts import Cell
from scripts.kernel_truth.vllm_side import VllmSide


# ------------------------------------------------------------------------------------------- comparing
@dataclass
class Finding:
    op: str
    tag: str
    chip: str
    graph: str
    pa_shape: bool
    call: str
    vllm: VllmSide
    table_kernel: str
    table_recipe: str
    table_row: str
    table_reason: str
    kinds: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    acknowledged: str = ""

    @property
    def series(self) -> tuple:
        return (self.op, self.chip, self.graph, self.pa_shape, self.call)

    def vllm_text(self) -> str:
        v = self.vllm
        if v.status == "calls":
            text = " + ".join(v.fallback)
            if v.own:
                text = f"{' + '.join(v.kernels)} (torch_npu path: {text})"
            return text
        if v.status == "undecided":
            return f"undecided ({v.reason})"
        if v.status == "unsupported":
            return "chip unknown"
        if v.status == "refuses":
            return f"refuses ({v.reason[:60]})"
        return "native"


def cell_label(cell: Cell) -> str:
    """The call and the quantization facts of a cell, as the report shows them."""
    parts = [cell.call.label]
    if cell.op == "quant_weight_layout" and cell.quant:
        parts.append(cell.quant)
    if cell.checkpoint != "msmodelslim":
        parts.append(cell.checkpoint)
    return ", ".join(parts)


def compare(tag: TagInfo, cell: Cell, side: VllmSide, choice) -> Finding:
    row = choice.row
    finding = Finding(
        cell.op,
        tag.ref,
        cell.chip,
        cell.graph,
        cell.pa_shape,
        cell_label(cell),
        side,
        choice.kernel,
        choice.recipe,
        row.id if row else "",
        choice.reason if choice.native else "",
    )
    ack = getattr(row, "differs", "") if row is not None else ""
    if row is None and choice.reason.startswith("refused:"):
        ack = choice.reason  # an op ascend_backend declines (recipes.REFUSED), with its reason
    table_calls = tuple(choice.kernel.split(" + ")) if choice.kernel != "native" else ("native",)
    if side.status == "unsupported":
        if row is not None:
            finding.kinds.append("different kernel")
            finding.details.append(f"row {row.id} lists {cell.chip}; {side.reason}")
    elif side.status == "undecided":
        finding.kinds.append("missing condition")
        finding.details.append(f"{side.reason}; decided by: {'; '.join(side.conditions) or 'nothing the audit knows'}")
    elif side.status in ("native", "refuses"):
        if table_calls != ("native",):
            finding.kinds.append("different kernel")
            finding.details.append(
                f"vllm-ascend runs no torch_npu kernel here ({side.reason or side.status}); the table runs {choice.kernel}"
            )
    else:
        if table_calls != side.fallback:
            finding.kinds.append("different kernel")
            finding.details.append(
                f"vllm-ascend {' + '.join(side.fallback)} ({', '.join(side.where)}); table {choice.kernel}"
            )
        else:
            diffs = argument_differences(tag, cell.op, choice.recipe, side.calls)
            if diffs:
                finding.kinds.append("different arguments")
                finding.details += diffs
        if side.own and row is not None and not all(_declared(k, row) for k in side.own):
            finding.kinds.append("own kernel undeclared")
            finding.details.append(f"vllm-ascend's default is {', '.join(side.own)}; row {row.id} does not name it")
        if side.own and row is None and table_calls == ("native",):
            pass
    if side.conditions and side.status != "undecided":
        finding.kinds.append("missing condition")
        finding.details += [f"condition: {c}" for c in side.conditions]
    if finding.kinds and ack:
        finding.acknowledged = ack
    return finding


def _declared(kernel: str, row) -> bool:
    declared = getattr(row, "vllm_default", "") or ""
    short = kernel.split(":", 1)[-1].split(".")[-1]
    return short in declared or kernel in declared


def reclassify_tags(findings: list[Finding]) -> None:
    """A kernel disagreement where the table has vllm-ascend's kernel of the neighbouring tag: a different tag."""
    series: dict[tuple, list[Finding]] = defaultdict(list)
    for f in findings:
        series[f.series].append(f)
    for items in series.values():
        for i, f in enumerate(items):
            if "different kernel" not in f.kinds or f.vllm.status != "calls":
                continue
            table = f.table_kernel
            neighbours = [items[j] for j in (i - 1, i + 1) if 0 <= j < len(items)]
            if f.acknowledged:
                continue  # a deliberate difference stays what it is
            if any(n.vllm.status == "calls" and " + ".join(n.vllm.fallback) == table for n in neighbours):
                f.kinds[f.kinds.index("different kernel")] = "different tag"
