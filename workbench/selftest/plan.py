"""Which NPU kernels a hardware self-test runs: every recipe the release and chip select, and the other chips'.

For the selection context (this machine's, or the release a user names) every table row that covers the
release and the chip names a recipe; each distinct (op, recipe) is one item, run with the row's call
conditions (head size, rotary form, quantization scheme) and pinned through the override
(ASCEND_BACKEND_KERNELS=<op>=<recipe>, with chip=<X> for another chip's row), so the recipe runs whatever
the table would pick for a typical call. Rows of the other chips at the same release whose recipes this
chip's rows do not name are items too (`other_chip`): they tell whether the hardware executes them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ascend_backend.platform.kernels import ChipFamily, KernelRow, SelectionContext, kernel_table
from ascend_backend.platform.kernels.recipes import NATIVE, RECIPES

# Ops whose NPU recipe takes an int8 activation (a fused norm-quant ran before): the row's `prequantized`.
PREQUANTIZED = "prequantized"


@dataclass(frozen=True)
class KernelItem:
    """One recipe to run on the hardware: which op, recipe and torch_npu call(s), and the row that names it."""

    op: str
    recipe: str
    kernel: str
    chip: ChipFamily  # the chip whose row names the recipe
    row: str
    citation: str
    when: tuple[tuple[str, object], ...]
    other_chip: bool  # another chip's recipe, run through the override

    @property
    def key(self) -> str:
        return f"{self.op}:{self.recipe}" + (f"@{self.chip.value}" if self.other_chip else "")

    def override(self, context: SelectionContext) -> str:
        """The ASCEND_BACKEND_KERNELS value that runs this recipe under `context`."""
        parts = [f"release={context.release}", f"chip={self.chip.value}", f"{self.op}={self.recipe}"]
        return ",".join(parts)


def _rows(op: str, context: SelectionContext, chip: ChipFamily) -> list[KernelRow]:
    assert context.release is not None
    return [
        r for r in kernel_table() if r.op == op and r.recipe != NATIVE and chip in r.chips and r.covers(context.release)
    ]


def plan_items(
    context: SelectionContext, ops: tuple[str, ...] = (), other_chips: bool = True
) -> tuple[KernelItem, ...]:
    """The items for `context` (its release must be known), this chip's first, then the other chips'."""
    items: dict[tuple[str, str], KernelItem] = {}
    chips = [context.chip] + ([c for c in ChipFamily if c is not context.chip] if other_chips else [])
    for chip in chips:
        for op in sorted(RECIPES):
            if ops and op not in ops:
                continue
            for row in _rows(op, context, chip):
                key = (op, row.recipe)
                if key not in items:
                    other = chip is not context.chip
                    items[key] = KernelItem(op, row.recipe, row.kernel, chip, row.id, row.citation, row.when, other)
    return tuple(items.values())


__all__ = ["PREQUANTIZED", "KernelItem", "plan_items"]
