"""A node bundle: one file per node holding everything the cluster check reads about that node.

    {"kind": "node-bundle", "schema_version": 1, "provenance": {...},
     "node": "node0", "hostname": "a2-node0", "source": "collected",
     "stack": {...the stack fingerprint's keys...}, "collect_env": null,
     "npu_smi": "<npu-smi info>", "hccn": {"0": {"ip": "ipaddr:...", "link": "link status: UP", ...}},
     "hccn_conf": "address_0=...", "env": {"HCCL_IF_IP": "...", ...},
     "command": ["vllm", "serve", "/models/x", "--data-parallel-size", "2", ...], "script": null,
     "interfaces": {"eth0": ["192.0.0.1"]}, "ports": [{"address": "0.0.0.0", "port": 8000, "pid": 123}],
     "own_pids": [123], "clock_offset_s": 0.004, "collected_at": 1767225600.0}

A bundle comes from `ascend-workbench collect` on the node itself, from one Ray task per node
(`workbench.cluster.collect`), from a launch script or a thread's transcription (`script`: the exports and
the serve line as written), or from a launch plan before anything starts (the loopback cluster). What a
source cannot know stays empty (no hccn_tool on a CPU machine, no clock offset from a copied file) and the
check skips the rules that would need it, saying which.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.results.envelope import DocumentKind, write_result

NODE_BUNDLE_KIND = DocumentKind("node-bundle", 1)

# The environment a bundle keeps: what decides how the node joins the cluster (HCCL, the collective
# interfaces, vLLM and vllm-ascend, Ray, the CPU engine) and nothing else — a shell's environment also
# holds tokens and keys, which a file meant to be copied between machines must not.
ENV_PREFIXES = (
    "HCCL_",
    "HCCN_",
    "ASCEND_",
    "VLLM_",
    "GLOO_",
    "TP_SOCKET_",
    "NCCL_",
    "MASTER_",
    "RAY_",
    "OMP_",
    "PYTORCH_NPU_",
    "LLMDATADIST_",
    "ACL_",
    "TASK_QUEUE_",
    "MOONCAKE_",
    "DISAGGREGATED_",
)
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "KEY")


def kept_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of `environ` a bundle records (ENV_PREFIXES, secrets left out), sorted."""
    return {
        k: v
        for k, v in sorted(environ.items())
        if k.startswith(ENV_PREFIXES) and not any(word in k for word in _SECRET_WORDS)
    }


@dataclass(frozen=True)
class ListeningPort:
    """A TCP port some process on the node listens on."""

    address: str
    port: int
    pid: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"address": self.address, "port": self.port, "pid": self.pid}


@dataclass(frozen=True)
class NodeBundle:
    """What one node runs and how it is set up (see the module docstring for each field)."""

    node: str
    hostname: str | None = None
    source: str = "collected"  # collected | files | script | plan
    stack: Mapping[str, Any] = field(default_factory=dict)
    collect_env: str | None = None
    npu_smi: str | None = None
    hccn: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # device id -> query -> output
    hccn_conf: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    command: tuple[str, ...] = ()
    script: str | None = None
    interfaces: Mapping[str, tuple[str, ...]] | None = None  # None: not recorded
    ports: tuple[ListeningPort, ...] | None = None  # None: not recorded
    own_pids: tuple[int, ...] = ()  # the serving processes themselves (their own ports are no collision)
    clock_offset_s: float | None = None
    collected_at: float | None = None
    notes: tuple[str, ...] = ()  # what the collector could not record, and why

    def __post_init__(self) -> None:
        if not self.node:
            raise WorkbenchError("a node bundle needs a node name (--node NAME)")

    @property
    def host(self) -> str:
        """Which machine the node is: nodes of the loopback cluster share one."""
        return self.hostname or self.node

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["stack"] = dict(self.stack)
        data["hccn"] = {k: dict(v) for k, v in self.hccn.items()}
        data["env"] = dict(self.env)
        data["command"] = list(self.command)
        data["interfaces"] = None if self.interfaces is None else {k: list(v) for k, v in self.interfaces.items()}
        data["ports"] = None if self.ports is None else [p.to_dict() for p in self.ports]
        data["own_pids"] = list(self.own_pids)
        data["notes"] = list(self.notes)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "bundle") -> NodeBundle:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        try:
            if values.get("ports") is not None:
                values["ports"] = tuple(ListeningPort(**p) for p in values["ports"])
            if values.get("interfaces") is not None:
                values["interfaces"] = {k: tuple(v) for k, v in values["interfaces"].items()}
            values["command"] = tuple(values.get("command") or ())
            values["own_pids"] = tuple(values.get("own_pids") or ())
            values["notes"] = tuple(values.get("notes") or ())
            return cls(**values)
        except (TypeError, AttributeError) as exc:
            raise WorkbenchError(f"{where}: not a node bundle this workbench reads ({exc}); collect it again") from None

    def write(self, path: Path | str, provenance: Mapping[str, Any]) -> Path:
        return write_result(Path(path), self.to_dict(), provenance, NODE_BUNDLE_KIND)


def read_bundle(path: Path | str) -> NodeBundle:
    """A bundle file written by `collect` (or by hand from the same keys); one clear error otherwise."""
    return NodeBundle.from_dict(NODE_BUNDLE_KIND.read(path), str(path))


__all__ = ["ENV_PREFIXES", "NODE_BUNDLE_KIND", "ListeningPort", "NodeBundle", "kept_env", "read_bundle"]
