"""What the module stage of a twin run found: where the two sides' module outputs first part (pure data).

Written by `workbench.twin.locate`, held by `TwinResult.located` and saved inside `twin.json` under `locate`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class LocateResult:
    """Where the two sides' module outputs first part, at the diverging step of one prompt."""

    prompt: int
    prompt_name: str
    steps: int
    directory: str
    compared: int
    errors: int
    first_module: str | None  # vLLM's module name, e.g. model.layers.2.post_attention_layernorm
    first_key: str | None
    first_step: int | None
    reason: str | None
    ops: tuple[str, ...]  # registry ops that ran inside the first diverging module
    repro: str | None  # the exported single-op repro script
    worst_cosine_by_kind: dict[str, float]
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"ops": list(self.ops), "notes": list(self.notes)}

    def text(self) -> str:
        lines = [
            f"module stage: prompt {self.prompt} ({self.prompt_name}), {self.steps} engine step(s), "
            f"{self.compared} module outputs compared, {self.errors} errors"
        ]
        if self.first_module is not None:
            ops = ", ".join(self.ops) or "no registry op (vLLM's own kernel, e.g. a GEMM)"
            lines.append(f"first diverging module: {self.first_module} (step {self.first_step}; {self.reason})")
            lines.append(f"its op: {ops}")
        else:
            lines.append("the two sides' module outputs agree at every compared module")
        if self.repro:
            lines.append(f"single-op repro: python {self.repro} [--device npu:0]")
        lines += [f"note: {note}" for note in self.notes]
        return "\n".join(lines)


__all__ = ["LocateResult"]
