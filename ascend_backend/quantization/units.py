"""Rollback units: the groups of linears that are kept in float (or quantized) together.

vLLM runs q/k/v as one `qkv_proj` and gate/up as one `gate_up_proj`, and a fused layer has one scheme
(`quantizer.FUSED_GROUPS`), so the smallest thing a quantization plan can roll back to float is a fused
group. Per decoder layer there are four:

    unit                      members                                         reads
    model.layers.3.qkv        self_attn.q_proj, k_proj, v_proj                the input norm's output
    model.layers.3.o          self_attn.o_proj                                attention's output
    model.layers.3.gate_up    mlp.gate_proj, up_proj                          the post-attention norm's output
    model.layers.3.down       mlp.down_proj                                   silu(gate) * up

Each unit reads one activation (its members share the input), which is what the sensitivity proxies
measure and what a static scheme's one input scale must cover.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

UNIT_KINDS = ("qkv", "o", "gate_up", "down")
_LEAF_KIND = {
    "q_proj": "qkv",
    "k_proj": "qkv",
    "v_proj": "qkv",
    "o_proj": "o",
    "gate_proj": "gate_up",
    "up_proj": "gate_up",
    "down_proj": "down",
}
_LAYER = re.compile(r"^(?P<stem>(?:.*\.)?layers\.(?P<index>\d+))\.(?:self_attn|mlp)\.(?P<leaf>\w+_proj)$")


@dataclass(frozen=True)
class RollbackUnit:
    """One fused group of one decoder layer, e.g. `model.layers.3.gate_up` = (gate_proj, up_proj)."""

    name: str  # "<layer stem>.<kind>", e.g. model.layers.3.qkv
    layer: int
    kind: str  # one of UNIT_KINDS
    members: tuple[str, ...]  # module prefixes in fused order (q, k, v; gate, up)

    @property
    def reader(self) -> str:
        """The member whose input stands for the unit's input (all members read the same tensor)."""
        return self.members[0]


def rollback_units(prefixes: Sequence[str]) -> list[RollbackUnit]:
    """The units of a model's decoder projections (`quantizer.linear_prefixes`), by layer then UNIT_KINDS order.

    A projection outside the four kinds (a model with other linears in its blocks) is its own unit.
    """
    groups: dict[tuple[int, str], list[str]] = {}
    stems: dict[int, str] = {}
    for prefix in prefixes:
        match = _LAYER.match(prefix)
        if match is None:
            raise ValueError(f"{prefix} is not a decoder projection (model.layers.N.self_attn|mlp.*_proj)")
        index = int(match["index"])
        stems[index] = match["stem"]
        kind = _LEAF_KIND.get(match["leaf"], match["leaf"])
        groups.setdefault((index, kind), []).append(prefix)
    order = {kind: i for i, kind in enumerate(UNIT_KINDS)}
    keys = sorted(groups, key=lambda key: (key[0], order.get(key[1], len(order)), key[1]))
    leaves = list(_LEAF_KIND)
    fused = {key: tuple(sorted(members, key=lambda p: _leaf_rank(p, leaves))) for key, members in groups.items()}
    return [RollbackUnit(f"{stems[i]}.{kind}", i, kind, fused[(i, kind)]) for i, kind in keys]


def _leaf_rank(prefix: str, leaves: list[str]) -> tuple[int, str]:
    leaf = prefix.rsplit(".", 1)[-1]
    return (leaves.index(leaf) if leaf in leaves else len(leaves), leaf)


def unit_of(units: Iterable[RollbackUnit]) -> dict[str, RollbackUnit]:
    """Module prefix -> its unit."""
    return {member: unit for unit in units for member in unit.members}


def expand(plan: Mapping[str, object], units: Sequence[RollbackUnit]) -> dict[str, object]:
    """A plan by unit name -> the same plan by module prefix (every member takes its unit's value)."""
    by_name = {unit.name: unit for unit in units}
    unknown = sorted(set(plan) - set(by_name))
    if unknown:
        raise KeyError(f"unknown rollback unit {unknown[0]!r}; units look like {units[0].name if units else '-'}")
    return {member: value for name, value in plan.items() for member in by_name[name].members}
