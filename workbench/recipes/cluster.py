"""Cluster recipes (`recipes/cluster/*.yaml`): one serving recipe run as several "nodes" on this machine.

A cluster recipe is a serving recipe (model, dtype, context, engine, env: what every node runs) with a
`cluster:` section saying how the nodes join (docs/METHOD.md §20):

    cluster:
      mode: dp                       # one data-parallel group: node0 serves the API, the others --headless
      nodes:
        - {name: node0, env: {VLLM_CPU_OMP_THREADS_BIND: "0"}}
        - {name: node1, env: {VLLM_CPU_OMP_THREADS_BIND: "1"}}

    cluster:
      mode: pd                       # one prefill and one decode server joined by a KV connector, a proxy in front
      nodes:
        - {name: prefill, role: prefill, env: {VLLM_CPU_OMP_THREADS_BIND: "0"}}
        - {name: decode, role: decode, env: {VLLM_CPU_OMP_THREADS_BIND: "1"}}

Each node's `env` and `args` are added to what the launcher derives (the data-parallel flags, the KV-transfer
configuration), and win: that is how a test plants an inconsistency (a mismatched variable, a taken port, a
wrong rank), which `check --cluster` must refuse before any node starts. The recipe is read by the one
serving-recipe reader (`load_serving_recipe` also finds names in recipes/cluster/), so `twin`, `bench`,
`sweep` and `profile` take a cluster recipe where they take a serving recipe.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from workbench.recipes.reader import Frozen
from workbench.settings import recipes_dir


class ClusterMode(str, enum.Enum):
    DP = "dp"
    PD = "pd"


class ClusterNode(Frozen):
    name: str = Field(min_length=1)
    role: Literal["prefill", "decode"] | None = None
    env: dict[str, str] = {}
    args: tuple[str, ...] = ()

    @field_validator("env", mode="before")
    @classmethod
    def _strings(cls, value: Any) -> Any:
        return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else value

    @field_validator("args", mode="before")
    @classmethod
    def _args(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError("args is a list of separate arguments, e.g. ['--data-parallel-start-rank', '1']")
        return tuple(str(a) for a in value or ())


class ClusterSpec(Frozen):
    mode: ClusterMode
    nodes: tuple[ClusterNode, ...] = Field(min_length=2)
    address: str = "127.0.0.1"  # dp: --data-parallel-address (the master's)
    rpc_port: int | None = Field(None, ge=1, le=65535)  # dp: --data-parallel-rpc-port (default: a free port)
    kv_connector: str = "ExampleConnector"  # pd: vLLM's connector both sides load
    shared_storage: Path | None = None  # pd: ExampleConnector's folder (default: a fresh one under runs/)

    @model_validator(mode="after")
    def _roles(self) -> ClusterSpec:
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError(f"node names must be unique, got {names}")
        roles = [n.role for n in self.nodes]
        if self.mode is ClusterMode.PD and sorted(r or "" for r in roles) != ["decode", "prefill"]:
            raise ValueError("a pd cluster has two nodes, one with role: prefill and one with role: decode")
        if self.mode is ClusterMode.DP and any(roles):
            raise ValueError("role is for pd clusters; a dp cluster's first node is the master")
        return self

    def node(self, role: str) -> ClusterNode:
        return next(n for n in self.nodes if n.role == role)

    def with_node(self, name: str, *, args: tuple[str, ...] = (), env: dict[str, str] | None = None) -> ClusterSpec:
        """A copy whose node `name` gets `args` and `env` on top of its own (how a test plants an inconsistency)."""
        if name not in [n.name for n in self.nodes]:
            raise ValueError(f"no node {name!r}; the nodes are {[n.name for n in self.nodes]}")
        nodes = [
            n.model_copy(update={"args": (*n.args, *args), "env": {**n.env, **(env or {})}}) if n.name == name else n
            for n in self.nodes
        ]
        return self.model_copy(update={"nodes": tuple(nodes)})


def cluster_dir() -> Path:
    return recipes_dir() / "cluster"


def list_cluster_recipes() -> list[str]:
    return sorted(p.stem for p in cluster_dir().glob("*.yaml"))


__all__ = ["ClusterMode", "ClusterNode", "ClusterSpec", "cluster_dir", "list_cluster_recipes"]
