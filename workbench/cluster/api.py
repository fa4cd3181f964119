"""The cluster API: what `collect`, `check --cluster`, `plan` and notebook 13 call.

    result = run_collect(CollectRequest(out=Path("node0.json")))                       # on a node
    result = run_collect(CollectRequest(out=Path("bundles/"), ray="auto"))             # every node of a Ray cluster
    checked = run_cluster_check(ClusterCheckRequest(bundles=(Path("node0.json"), Path("node1.json"))))
    plan = run_plan(PlanRequest(model="tiny", chips="2xcpu", layout="tp=2", kv_cache_gib=1))
    print(checked.text()); print(plan.text())

Each request is checked when it is made (a WorkbenchError names the field and the fix); each result has
`text()`, `to_dict()` and is written with its kind ("node-bundle", "cluster-check", "plan").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.cluster.bundle import NODE_BUNDLE_KIND, NodeBundle, read_bundle
from workbench.cluster.check import CLUSTER_CHECK_KIND, ClusterCheckResult, check_bundles
from workbench.cluster.collect import collect_from_files, collect_here, collect_over_ray, planned_bundle
from workbench.cluster.model_facts import model_facts
from workbench.cluster.plan import PLAN_KIND, Plan, make_plan
from workbench.cluster.planner import GIB, Chips, Engine, Layout, load_figures
from workbench.cluster.rules import load_rules
from workbench.errors import WorkbenchError
from workbench.stack.provenance import provenance


@dataclass(frozen=True)
class CollectRequest:
    """One node's bundle to `out` (this node, or copied files), or every Ray node's bundle into the folder `out`."""

    out: Path
    node: str | None = None  # the name findings use (default: the host name)
    pid: int | None = None  # the vLLM serve / ray start process (default: the only one running here)
    script: Path | None = None  # a launch script standing in for the running process
    from_files: Path | None = None  # a folder of files copied off a node
    ray: str | None = None  # a Ray cluster address ("auto" on one of its nodes)

    def __post_init__(self) -> None:
        sources = [name for name, v in (("--from-files", self.from_files), ("--ray", self.ray)) if v is not None]
        if len(sources) > 1 or (sources and (self.pid is not None or self.script is not None)):
            raise WorkbenchError(
                f"collect: give one source ({', '.join(sources + ['--pid/--script'])} exclude each other)"
            )
        if self.from_files is not None and not self.node:
            raise WorkbenchError("--from-files: name the node the files came from with --node NAME")
        if self.script is not None and not Path(self.script).is_file():
            raise WorkbenchError(f"--script {self.script}: no such file; give the node's launch script")


@dataclass(frozen=True)
class CollectResult:
    bundles: tuple[NodeBundle, ...]
    paths: tuple[Path, ...]

    def text(self) -> str:
        lines = []
        for bundle, path in zip(self.bundles, self.paths, strict=True):
            hccn = f"{len(bundle.hccn)} NPUs via hccn_tool" if bundle.hccn else "no hccn_tool"
            command = (
                " ".join(bundle.command)[:70]
                if bundle.command
                else ("a launch script" if bundle.script else "no serve command")
            )
            lines.append(f"{bundle.node} ({bundle.host}): {hccn}; {command} -> {path}")
            lines += [f"  note: {note}" for note in bundle.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"bundles": [str(p) for p in self.paths], "nodes": [b.node for b in self.bundles]}


def _write(bundle: NodeBundle, path: Path) -> Path:
    return bundle.write(path, provenance())


def run_collect(request: CollectRequest) -> CollectResult:
    if request.ray is not None:
        bundles = collect_over_ray(request.ray)
        folder = Path(request.out)
        paths = [_write(b, folder / f"{b.node}.json") for b in bundles]
        return CollectResult(tuple(bundles), tuple(paths))
    if request.from_files is not None:
        bundle = collect_from_files(request.node or "", Path(request.from_files))
    else:
        script = Path(request.script).read_text(encoding="utf-8") if request.script else None
        bundle = collect_here(request.node, pid=request.pid, script=script)
    return CollectResult((bundle,), (_write(bundle, Path(request.out)),))


@dataclass(frozen=True)
class ClusterCheckRequest:
    bundles: tuple[Path, ...]
    rules: Path | None = None  # default policy/cluster/rules.yaml
    out: Path | None = None

    def __post_init__(self) -> None:
        if not self.bundles:
            raise WorkbenchError(
                "--cluster: give the node bundles to check (files written by `ascend-workbench collect`)"
            )


def run_cluster_check(request: ClusterCheckRequest, bundles: Sequence[NodeBundle] = ()) -> ClusterCheckResult:
    """Check the bundle files (or `bundles` already in memory, e.g. the loopback cluster's plans)."""
    read = list(bundles) or [read_bundle(p) for p in request.bundles]
    result = check_bundles(read, rules=load_rules(request.rules))
    if request.out is not None:
        result.write(request.out, provenance())
    return result


def planned_bundles(nodes: Sequence[tuple[str, Sequence[str], Mapping[str, str]]]) -> list[NodeBundle]:
    """Bundles of nodes about to start on this machine: (name, argv, environment) each."""
    return [planned_bundle(name, argv, env) for name, argv, env in nodes]


def check_planned_nodes(nodes: Sequence[tuple[str, Sequence[str], Mapping[str, str]]]) -> ClusterCheckResult:
    """The cluster check over nodes about to start on this machine: (name, argv, environment) each."""
    return check_bundles(planned_bundles(nodes), rules=load_rules())


def write_bundles(bundles: Sequence[NodeBundle], folder: Path | str) -> tuple[Path, ...]:
    """Each bundle to `folder`/NODE.json (what `collect` writes on each node), stamped."""
    return tuple(_write(b, Path(folder) / f"{b.node}.json") for b in bundles)


def bundles_table(bundles: Sequence[NodeBundle]) -> pd.DataFrame:
    """One row per node: where it runs, its instance, and its serve command as the check reads it."""
    from workbench.cluster.node import view

    rows = []
    for bundle in bundles:
        settings = view(bundle)
        flags = " ".join(f"{k} {v}" if v is not None else k for k, v in settings.flags.items())
        rows.append({"node": bundle.node, "host": bundle.host, "instance": settings.instance, "flags": flags})
    return pd.DataFrame(rows)


def findings_table(result: ClusterCheckResult) -> pd.DataFrame:
    """One row per finding: severity, node, setting, what, fix (the source stays in the result)."""
    rows = [
        {"severity": f.severity.value, "node": f.node, "setting": f.setting, "finding": f.message, "fix": f.fix}
        for f in result.findings
    ]
    return pd.DataFrame(rows, columns=["severity", "node", "setting", "finding", "fix"])


def plan_table(plans: Sequence[Plan]) -> pd.DataFrame:
    """One row per plan: layout, weights and KV per rank, the largest context and batch, and the verdict."""
    rows = []
    for plan in plans:
        weights = sum(v for k, v in plan.per_rank.items() if k.startswith("weights."))
        rows.append(
            {
                "layout": plan.layout.text(),
                "ranks": plan.layout.ranks,
                "weights_gib": round(weights / GIB, 4),
                "kv_tokens_per_rank": plan.kv_tokens,
                "max_context": plan.max_context,
                "max_batch": plan.max_batch,
                "verdict": plan.refusal.text() if plan.refusal else "fits",
            }
        )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class PlanRequest:
    model: str  # an embedded model, a model directory or its config.json
    chips: str  # NODESxCHIPSxKIND, CHIPSxKIND or 1xcpu
    layout: str | Mapping[str, int] = "tp=1"  # "tp=8,dp=2", or {"tp": 8, "dp": 2} (a notebook parameter
    # cannot hold '=': papermill drops such a line)
    pd: bool = False  # a prefill/decode instance: the KV connector's memory counts
    connector: str | None = None  # default with --pd: MooncakeConnector on NPUs, ExampleConnector on the CPU
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.9
    kv_cache_gib: float | None = None  # the CPU engine's VLLM_CPU_KVCACHE_SPACE (or a fixed KV budget)
    block_size: int | None = None  # default 128 on NPUs, 32 on the CPU engine
    dtype: str | None = None
    weight_bits: int | None = None
    enforce_eager: bool = False
    hccl_buffsize_mb: int | None = None
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    figures: Path | None = None
    out: Path | None = None

    def __post_init__(self) -> None:
        if isinstance(self.layout, Mapping):
            object.__setattr__(self, "layout", ",".join(f"{k}={v}" for k, v in self.layout.items()))
        if not 0 < self.gpu_memory_utilization <= 1:
            raise WorkbenchError(f"--gpu-memory-utilization {self.gpu_memory_utilization}: a fraction in (0, 1]")
        if self.weight_bits is not None and self.weight_bits not in (4, 8, 16):
            raise WorkbenchError(f"--weight-bits {self.weight_bits}: 4, 8 or 16")
        if self.connector is not None and not self.pd:
            raise WorkbenchError("--connector applies to a prefill/decode plan; add --pd")

    def engine(self, cpu: bool) -> Engine:
        connector = (self.connector or ("ExampleConnector" if cpu else "MooncakeConnector")) if self.pd else None
        return Engine(
            self.max_model_len,
            self.gpu_memory_utilization,
            int(self.kv_cache_gib * GIB) if self.kv_cache_gib else None,
            self.block_size or (32 if cpu else 128),
            self.dtype,
            self.weight_bits,
            self.max_num_seqs,
            self.max_num_batched_tokens,
            self.enforce_eager,
            self.hccl_buffsize_mb,
            connector,
        )


def run_plan(request: PlanRequest) -> Plan:
    figures = load_figures(request.figures)
    chips = Chips.parse(request.chips, figures)
    engine = request.engine(chips.memory_bytes is None)
    plan = make_plan(model_facts(request.model), chips, Layout.parse(request.layout), engine, figures)
    plan = dataclasses.replace(plan, model=str(request.model))  # as the user named it
    if request.out is not None:
        plan.write(request.out, provenance(model_dir=None))
    return plan


__all__ = [
    "CLUSTER_CHECK_KIND",
    "ClusterCheckRequest",
    "ClusterCheckResult",
    "CollectRequest",
    "CollectResult",
    "NODE_BUNDLE_KIND",
    "NodeBundle",
    "PLAN_KIND",
    "Plan",
    "PlanRequest",
    "read_bundle",
    "run_cluster_check",
    "run_collect",
    "run_plan",
]
