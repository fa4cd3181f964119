"""Rules over each node's network: interfaces and addresses that exist, the NPU ports `hccn_tool` reports
against `/etc/hccn.conf`, device addresses unique across the cluster, ports nobody else holds, clocks."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from workbench.cluster.findings import ClusterFinding, finding, groups, is_npu
from workbench.cluster.hccn import parse_hccn_conf, parse_ip, parse_link, parse_lldp, parse_net_health
from workbench.cluster.node import NodeView
from workbench.cluster.rules import Rule


def _interface_names(value: str) -> list[str]:
    """'eth0,eth1' -> ['eth0', 'eth1']; HCCL's '=eth0' (exact) keeps eth0; '^docker' (exclude) names none."""
    return [part.lstrip("=") for part in value.split(",") if part.strip() and not part.startswith("^")]


def interface_exists(rule: Rule, views: Sequence[NodeView]) -> list[ClusterFinding]:
    found = []
    for v in views:
        interfaces = v.bundle.interfaces
        if interfaces is None:
            continue
        for setting in rule.settings:
            for name in _interface_names(v.env.get(setting, "")):
                if not any(i == name or i.startswith(name) for i in interfaces):
                    listed = ", ".join(sorted(interfaces))
                    found.append(
                        finding(
                            rule, v.name, setting, f"interface {name!r} does not exist on this node", interfaces=listed
                        )
                    )
    return found


def address_on_node(rule: Rule, views: Sequence[NodeView]) -> list[ClusterFinding]:
    found = []
    for v in views:
        if v.bundle.interfaces is None:
            continue
        addresses = sorted({a for values in v.bundle.interfaces.values() for a in values})
        for setting in rule.settings:
            value = v.env.get(setting)
            if value and value not in addresses:
                message = f"{value} is not an address of this node"
                found.append(finding(rule, v.name, setting, message, addresses=", ".join(addresses)))
    return found


def hccn_conf(rule: Rule, views: Sequence[NodeView]) -> list[ClusterFinding]:
    found = []
    multi_host = len({v.bundle.host for v in views}) > 1
    for v in views:
        if v.bundle.hccn_conf is None:
            if multi_host and is_npu(v) and v.bundle.source == "collected":
                message = "/etc/hccn.conf is missing (in a container: not mounted); HCCL cannot find the device IPs"
                detail = "mount the host's /etc/hccn.conf and hccn_tool into the container (-v /etc/hccn.conf:/etc/hccn.conf)"
                found.append(finding(rule, v.name, "/etc/hccn.conf", message, detail=detail))
            continue
        conf = parse_hccn_conf(v.bundle.hccn_conf)
        for device, outputs in sorted(v.bundle.hccn.items(), key=lambda kv: int(kv[0])):
            if "ip" not in outputs:
                continue
            live = parse_ip(outputs["ip"])
            entry = conf.get(int(device))
            stated = entry.address if entry else None
            if live.address is not None and stated != live.address:
                message = (
                    f"hccn.conf says {stated or '(no address_' + str(device) + ')'}, the device has {live.address}"
                )
                detail = (
                    f"set address_{device} in /etc/hccn.conf to the device's {live.address} and restart the service"
                )
                found.append(finding(rule, v.name, f"address_{device}", message, detail=detail))
            elif live.address is None and stated is not None:
                message = f"hccn.conf says {stated}, but the device has none ({live.problem})"
                detail = f"give NPU {device} its address {stated} (hccn_tool -i {device} -ip -s address {stated} netmask ...) or fix the file"
                found.append(finding(rule, v.name, f"address_{device}", message, detail=detail))
    return found


def npu_link(rule: Rule, views: Sequence[NodeView]) -> list[ClusterFinding]:
    found = []
    for v in views:
        for device, outputs in sorted(v.bundle.hccn.items(), key=lambda kv: int(kv[0])):
            peer = parse_lldp(outputs["lldp"]).ifname if "lldp" in outputs else None
            link = parse_link(outputs["link"]) if "link" in outputs else None
            health = parse_net_health(outputs["net_health"]) if "net_health" in outputs else None
            problems = []
            if link is not None and link != "UP":
                problems.append(f"link {link}")
            if health is not None and health.lower() != "success":
                problems.append(f"net health {health}")
            if problems:
                found.append(
                    finding(rule, v.name, f"NPU {device}", ", ".join(problems), device=device, peer=peer or "?")
                )
    return found


def device_ip_unique(rule: Rule, views: Sequence[NodeView]) -> list[ClusterFinding]:
    owners: dict[str, list[str]] = defaultdict(list)
    for v in views:
        for device, outputs in v.bundle.hccn.items():
            address = parse_ip(outputs["ip"]).address if "ip" in outputs else None
            if address:
                owners[address].append(f"{v.name} NPU {device}")
    found = []
    for address, devices in owners.items():
        if len(devices) > 1:
            nodes = [d.rsplit(" NPU ", 1)[0] for d in devices]
            found.append(
                finding(
                    rule,
                    nodes,
                    "device address",
                    f"{address} is set on {len(devices)} NPUs",
                    address=address,
                    devices=", ".join(devices),
                )
            )
    return found


def bound_ports(rule: Rule, v: NodeView) -> dict[int, str]:
    """Ports the node will bind, each with the setting that names it."""
    ports: dict[int, str] = {}
    if v.api_port is not None:
        ports[v.api_port] = "--port"
    if v.serving and v.dp_size > 1 and not v.headless and v.dp_start_rank == 0:
        ports[v.dp_rpc_port] = "--data-parallel-rpc-port"
    for setting in rule.settings:
        text = v.env.get(setting)
        default = rule.defaults.get(setting)
        if text is None and default is not None and is_npu(v) and v.serving:
            ports.setdefault(int(default), f"{setting} (default {int(default)})")
        elif text and text.isdigit():
            ports.setdefault(int(text), setting)
    kv_port = (v.kv_transfer or {}).get("kv_port")
    if kv_port is not None and str(kv_port).isdigit():
        ports.setdefault(int(kv_port), "--kv-transfer-config.kv_port")
    return ports


def ports(rule: Rule, views: Sequence[NodeView]) -> list[ClusterFinding]:
    found = []
    for group in groups(views, rule.scope):
        claimed: dict[int, tuple[str, str]] = {}
        for v in group:
            for port, setting in sorted(bound_ports(rule, v).items()):
                if port in claimed and claimed[port][0] != v.name:
                    other, other_setting = claimed[port]
                    detail = (
                        f"give {v.name} another {setting.split(' ')[0]}: {other} already binds {port} ({other_setting})"
                    )
                    found.append(
                        finding(
                            rule,
                            [other, v.name],
                            setting,
                            f"port {port} is bound by two nodes on one machine",
                            detail=detail,
                        )
                    )
                claimed.setdefault(port, (v.name, setting))
                holder = _holder(v, port)
                if holder is not None:
                    detail = f"free port {port} ({holder}) or give {setting.split(' ')[0]} another port"
                    found.append(
                        finding(rule, v.name, setting, f"port {port} is already in use on this node", detail=detail)
                    )
    return found


def _holder(v: NodeView, port: int) -> str | None:
    for listening in v.bundle.ports or ():
        if listening.port == port and listening.pid not in v.bundle.own_pids:
            return f"pid {listening.pid}" if listening.pid else f"listening on {listening.address}"
    return None


def clock(rule: Rule, views: Sequence[NodeView]) -> list[ClusterFinding]:
    limit = rule.limit_s or 1.0
    return [
        finding(
            rule,
            v.name,
            "clock",
            f"{v.bundle.clock_offset_s:+.3f} s from the collector's clock",
            node=v.name,
            offset=v.bundle.clock_offset_s,
        )
        for v in views
        if v.bundle.clock_offset_s is not None and abs(v.bundle.clock_offset_s) > limit
    ]


__all__ = [
    "address_on_node",
    "bound_ports",
    "clock",
    "device_ip_unique",
    "hccn_conf",
    "interface_exists",
    "npu_link",
    "ports",
]
