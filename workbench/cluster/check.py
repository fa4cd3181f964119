"""The cluster check: every rule of the rule book over the node bundles, findings sorted worst first.

    result = check_bundles([read_bundle(p) for p in paths])     # or bundles built from launch plans
    print(result.text()); result.write(out)

Nothing here starts or contacts anything: the check reads bundles, so it runs before any node starts (the
loopback cluster refuses a planted inconsistency this way) and on bundles copied from a real cluster.
Rules whose inputs no bundle holds are listed as skipped with the reason, never passed silently.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.cluster import checks_network as net
from workbench.cluster import checks_serving as serving
from workbench.cluster import checks_stack as stack
from workbench.cluster.bundle import NodeBundle
from workbench.cluster.findings import ClusterFinding
from workbench.cluster.node import NodeView, view
from workbench.cluster.rules import Rule, RuleBook, RuleKind, load_rules
from workbench.envcheck.matrix import Matrix, load_matrices
from workbench.errors import WorkbenchError
from workbench.results.envelope import DocumentKind, write_result
from workbench.results.verdict import Verdict
from workbench.settings import recipes_dir

CLUSTER_CHECK_KIND = DocumentKind("cluster-check", 1)

Check = Callable[[Rule, Sequence[NodeView]], list[ClusterFinding]]
CHECKS: Mapping[RuleKind, Check] = {
    RuleKind.STACK_EQUAL: stack.stack_equal,
    RuleKind.ENV_EQUAL: stack.env_equal,
    RuleKind.ENV_DISTINCT: stack.env_distinct,
    RuleKind.CORES_DISJOINT: stack.cores_disjoint,
    RuleKind.INTERFACE_EXISTS: net.interface_exists,
    RuleKind.ADDRESS_ON_NODE: net.address_on_node,
    RuleKind.DATA_PARALLEL: serving.data_parallel,
    RuleKind.FLAGS_EQUAL: serving.flags_equal,
    RuleKind.HCCN_CONF: net.hccn_conf,
    RuleKind.NPU_LINK: net.npu_link,
    RuleKind.DEVICE_IP_UNIQUE: net.device_ip_unique,
    RuleKind.PORTS: net.ports,
    RuleKind.TIMEOUTS: serving.timeouts,
    RuleKind.KV_CONNECTOR: serving.kv_connector,
    RuleKind.CLOCK: net.clock,
}
# What a rule needs from a bundle; a rule none of the bundles can feed is reported as skipped.
_NEEDS: Mapping[RuleKind, tuple[str, Callable[[NodeBundle], bool]]] = {
    RuleKind.INTERFACE_EXISTS: ("no interface list", lambda b: b.interfaces is not None),
    RuleKind.ADDRESS_ON_NODE: ("no interface list", lambda b: b.interfaces is not None),
    RuleKind.NPU_LINK: ("no hccn_tool output", lambda b: bool(b.hccn)),
    RuleKind.DEVICE_IP_UNIQUE: ("no hccn_tool output", lambda b: bool(b.hccn)),
    RuleKind.STACK_EQUAL: ("no stack", lambda b: bool(b.stack)),
    RuleKind.STACK_IN_MATRIX: ("no stack", lambda b: bool(b.stack)),
    RuleKind.CLOCK: ("no clock offset (bundles copied by hand carry none)", lambda b: b.clock_offset_s is not None),
}


@dataclass(frozen=True)
class ClusterCheckResult:
    nodes: tuple[str, ...]
    instances: Mapping[str, tuple[str, ...]]
    findings: tuple[ClusterFinding, ...]
    skipped: tuple[str, ...]
    rules_file: str
    seconds: float
    out: Path | None = field(default=None, compare=False)

    @property
    def verdict(self) -> Verdict:
        return Verdict.worst(f.severity for f in self.findings)

    @property
    def failed(self) -> bool:
        return self.verdict is Verdict.ERROR

    def settings(self) -> set[str]:
        """Every setting some finding names (a test asks whether the thread's fix is among them)."""
        return {f.setting for f in self.findings}

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": list(self.nodes),
            "instances": {k: list(v) for k, v in self.instances.items()},
            "verdict": self.verdict.value,
            "findings": [f.to_dict() for f in self.findings],
            "skipped": list(self.skipped),
            "rules": self.rules_file,
            "seconds": self.seconds,
        }

    def text(self) -> str:
        head = f"cluster check of {len(self.nodes)} nodes ({', '.join(self.nodes)}): {self.verdict.value}"
        lines = [head] + [f"  instance {k}: {', '.join(v)}" for k, v in self.instances.items()]
        lines += [f.line() for f in self.findings] or ["no findings"]
        lines += [f"skipped {s}" for s in self.skipped]
        return "\n".join(lines)

    def write(self, path: Path | str, provenance: Mapping[str, Any]) -> Path:
        return write_result(Path(path), self.to_dict(), provenance, CLUSTER_CHECK_KIND)


def default_matrices() -> list[Matrix]:
    return load_matrices(sorted((recipes_dir() / "matrices").glob("*.yaml")))


def _run(rule: Rule, views: Sequence[NodeView], matrices: list[Matrix]) -> list[ClusterFinding]:
    if rule.kind is RuleKind.STACK_IN_MATRIX:
        return stack.stack_in_matrix(rule, views, matrices)
    return CHECKS[rule.kind](rule, views)


def check_bundles(
    bundles: Sequence[NodeBundle], *, rules: RuleBook | None = None, matrices: list[Matrix] | None = None
) -> ClusterCheckResult:
    """Every rule over `bundles`; node names must be unique (they name the findings)."""
    began = time.perf_counter()
    names = [b.node for b in bundles]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise WorkbenchError(
            f"node names must be unique across bundles; {', '.join(duplicates)} appears twice: "
            "collect again with --node NAME"
        )
    book = rules or load_rules()
    tables = matrices if matrices is not None else default_matrices()
    views = [view(b) for b in bundles]
    findings: list[ClusterFinding] = []
    skipped: list[str] = []
    for rule in book.rules:
        need = _NEEDS.get(rule.kind)
        if need is not None and not any(need[1](b) for b in bundles):
            skipped.append(f"{rule.id}: {need[0]} in any bundle")
            continue
        findings += _run(rule, views, tables)
    instances: dict[str, list[str]] = {}
    for v in views:
        instances.setdefault(v.instance, []).append(v.name)
    order = sorted(findings, key=lambda f: (-f.severity.severity, f.rule, f.node, f.setting))
    return ClusterCheckResult(
        tuple(names),
        {k: tuple(v) for k, v in instances.items()},
        tuple(order),
        tuple(skipped),
        str(book.source or ""),
        round(time.perf_counter() - began, 4),
    )


__all__ = ["CHECKS", "CLUSTER_CHECK_KIND", "ClusterCheckResult", "check_bundles", "default_matrices"]
