"""A small model the dump tests capture: Linear -> 2 x (LayerNorm -> Linear, residual) -> Linear."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc(self.norm(x))


class SmallNet(nn.Module):
    """Execution (completion) order: embed, blocks.0.norm, blocks.0.fc, blocks.0, blocks.1.*, head, <root>."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.embed = nn.Linear(8, width)
        self.blocks = nn.ModuleList([Block(width), Block(width)])
        self.head = nn.Linear(width, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


EXECUTION_ORDER = [
    "embed",
    "blocks.0.norm",
    "blocks.0.fc",
    "blocks.0",
    "blocks.1.norm",
    "blocks.1.fc",
    "blocks.1",
    "head",
    "<root>",
]


@pytest.fixture
def small_net() -> SmallNet:
    torch.manual_seed(0)
    return SmallNet().eval()


@pytest.fixture
def small_input() -> torch.Tensor:
    return torch.randn(3, 5, 8, generator=torch.Generator().manual_seed(1))  # [B, S, in]


def tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every file under `root`, to prove a failed compare changed nothing."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
