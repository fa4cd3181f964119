"""Read the transcribed launch sets of tests/fixtures/cluster/threads/ into node bundles."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import FIXTURES
from workbench.cluster.bundle import NodeBundle

THREADS = FIXTURES / "cluster" / "threads"


def thread_files() -> list[Path]:
    return sorted(THREADS.glob("*.yaml"))


def _substitute(script: str, values: dict[str, str]) -> str:
    """Replace the doc's placeholder assignments (`local_ip="xxxx"`) with the node's values."""
    for name, value in values.items():
        script = re.sub(rf'^(\s*){name}="[^"]*"', rf'\g<1>{name}="{value}"', script, flags=re.M)
    return script


def _network_nodes(network: dict[str, Any]) -> list[NodeBundle]:
    """Nodes whose NPU network the thread describes in words, written in hccn_tool's and hccn.conf's formats."""
    stale, mask = network["stale"], network["netmask"]
    bundles = []
    for index, node in enumerate(network["nodes"]):
        hccn, conf = {}, []
        for device in range(network["devices"]):
            address = f"192.168.{index}.{100 + device}"
            conf_address = address
            if node == stale["node"] and device == stale["device"]:
                address, conf_address = stale["device_address"], stale["conf_address"]
            hccn[str(device)] = {
                "ip": f"ipaddr:{address}\nnetmask:{mask}\n",
                "link": "link status: UP\n",
                "net_health": "net health status: Success\n",
            }
            conf += [f"address_{device}={conf_address}", f"netmask_{device}={mask}"]
        bundles.append(
            NodeBundle(
                node,
                hostname=node,
                source="collected",
                stack={"chip": "910B3"},
                hccn=hccn,
                hccn_conf="\n".join(conf) + "\n",
            )
        )
    return bundles


def load_thread(path: Path) -> tuple[dict[str, Any], list[NodeBundle]]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if "network" in data:
        return data, _network_nodes(data["network"])
    bundles = []
    for node in data["nodes"]:
        script = node.get("script")
        if script is not None:
            script = _substitute(script, data.get("substitute", {}).get(node["node"], {}))
        bundles.append(
            NodeBundle(
                node["node"],
                hostname=node.get("hostname"),
                source=node.get("source", "script"),
                stack=node.get("stack", {}),
                script=script,
            )
        )
    return data, bundles
