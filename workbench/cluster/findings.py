"""What one cluster rule found, and the grouping of nodes the rules compare over.

A finding names the node (or nodes), the setting, what is wrong, the fix and the citation the rule rests on (a vllm-ascend file@tag or issue)
(`policy/cluster/rules.yaml`), so a user can act on it without reading the rule. The checks themselves live
in `checks_stack`, `checks_serving` and `checks_network`; `workbench.cluster.check` runs them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.cluster.node import NodeView
from workbench.cluster.rules import Rule, Scope
from workbench.results.verdict import Verdict


@dataclass(frozen=True)
class ClusterFinding:
    rule: str
    severity: Verdict
    node: str  # one node, or several joined by ', '
    setting: str
    message: str
    fix: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "severity": self.severity.value}

    def line(self) -> str:
        return f"[{self.severity.value}] {self.node}: {self.setting}: {self.message}\n    fix: {self.fix}\n    source: {self.source}"


def finding(rule: Rule, who: str | Iterable[str], setting: str, message: str, **fix_values: Any) -> ClusterFinding:
    """A finding of `rule` about node(s) `who`, its fix rendered with `fix_values` (the rule's placeholders)."""
    node = who if isinstance(who, str) else ", ".join(dict.fromkeys(who))
    fix = rule.render_fix(setting=setting, **fix_values)
    return ClusterFinding(rule.id, rule.severity, node, setting, message, fix, rule.source)


def groups(views: Sequence[NodeView], scope: Scope) -> list[list[NodeView]]:
    """The sets of nodes a rule of `scope` compares: all, each instance, or each host (groups of two or more
    come first; a single-node group is still returned for per-node rules)."""
    if scope is Scope.CLUSTER:
        return [list(views)]
    key: Callable[[NodeView], str] = (lambda v: v.instance) if scope is Scope.INSTANCE else (lambda v: v.bundle.host)
    found: dict[str, list[NodeView]] = defaultdict(list)
    for v in views:
        found[key(v)].append(v)
    return list(found.values())


def describe_values(values: Mapping[str, Any]) -> str:
    """{'node0': '200', 'node1': None} -> "node0=200, node1=(unset)"."""
    return ", ".join(f"{node}={'(unset)' if value is None else value}" for node, value in values.items())


def minority(values: Mapping[str, Any]) -> list[str]:
    """The nodes whose value differs from the most common one (all of them on a tie)."""
    counts = Counter(values.values())
    top, top_count = counts.most_common(1)[0]
    if list(counts.values()).count(top_count) > 1:
        return list(values)
    return [node for node, value in values.items() if value != top]


def is_npu(view: NodeView) -> bool:
    """Whether the node is an Ascend machine: its stack names a chip or torch-npu, or it holds npu-smi output."""
    stack = view.bundle.stack or {}
    versions = stack.get("versions") or {}
    return bool(stack.get("chip") or "torch-npu" in versions or "vllm-ascend" in versions or view.bundle.npu_smi)


__all__ = ["ClusterFinding", "describe_values", "finding", "groups", "is_npu", "minority"]
