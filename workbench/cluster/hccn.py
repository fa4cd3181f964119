"""The NPU network of one node, as `hccn_tool` and `/etc/hccn.conf` state it.

Every NPU of a multi-node Ascend cluster talks to the other nodes through its own RoCE port, whose
address, link and health only `hccn_tool` shows (vllm-ascend's multi-node check list runs it per device:
docs/source/installation.md at tag v0.25.1rc1, "Verify Multi-node Communication"), and whose address at
boot is the `address_N` line of `/etc/hccn.conf`. The outputs parsed here, as real machines print them
(tests/fixtures/cluster/hccn/SOURCES.md cites each sample):

    hccn_tool -i 3 -ip -g           ipaddr:29.1.112.213            (or "Get ipconf failed, because no ip
                                    netmask:255.255.0.0             was preset there!" when none is set)
    hccn_tool -i 0 -link -g         link status: UP
    hccn_tool -i 0 -net_health -g   net health status: Success     (Fault, or another word)
    hccn_tool -i 3 -lldp -g         Chassis ID TLV / MAC: ... / Port ID TLV / Ifname: 400GE1/1/20:2 / ...
    /etc/hccn.conf                  address_0=29.1.137.205 / netmask_0=255.255.0.0 / netdetect_0=29.1.0.1 /
                                    gateway_0=29.1.0.1 / send_arp_status_0=1 ...

Parsing keeps what it cannot read as None instead of guessing: a device whose `-ip -g` printed an error has
no address, and the check says so.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

_CONF_LINE = re.compile(r"^\s*([a-z_]+?)_(\d+)\s*=\s*(\S*)\s*$")
_VALUE = re.compile(r"^\s*([A-Za-z][A-Za-z ]*?)\s*:\s*(.*?)\s*$")


@dataclass(frozen=True)
class DeviceAddress:
    """`hccn_tool -i N -ip -g`: the address the device has now (None when none is set)."""

    address: str | None
    netmask: str | None
    problem: str | None = None  # what hccn_tool printed instead of an address


@dataclass(frozen=True)
class LldpPeer:
    """`hccn_tool -i N -lldp -g`: the switch port this device's cable ends in (None when no LLDP answer)."""

    ifname: str | None
    chassis: str | None
    management_ip: str | None


@dataclass(frozen=True)
class ConfEntry:
    """One device's lines in /etc/hccn.conf (`address_N`, `netmask_N`, `netdetect_N`, `gateway_N`)."""

    device: int
    address: str | None
    netmask: str | None
    netdetect: str | None
    gateway: str | None


def _values(text: str) -> dict[str, str]:
    """'key: value' lines -> {lowercased key: value}; the first occurrence of a key wins."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        match = _VALUE.match(line)
        if match and match.group(1).lower() not in found:
            found[match.group(1).lower()] = match.group(2)
    return found


def _ip(text: str | None) -> str | None:
    """`text` when it is an IPv4 or IPv6 address, else None."""
    if not text:
        return None
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        return None


def parse_ip(text: str) -> DeviceAddress:
    """`-ip -g` output -> the device's address; an error line is kept as the problem."""
    values = _values(text)
    address, netmask = _ip(values.get("ipaddr")), _ip(values.get("netmask"))
    if address is not None:
        return DeviceAddress(address, netmask)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return DeviceAddress(None, None, lines[0] if lines else "no output")


def parse_link(text: str) -> str | None:
    """`-link -g` output -> 'UP' / 'DOWN' (upper case), None when the output says neither."""
    value = _values(text).get("link status")
    return value.upper() if value else None


def parse_net_health(text: str) -> str | None:
    """`-net_health -g` output -> 'Success', 'Fault', ... as printed; None when absent."""
    return _values(text).get("net health status") or None


def parse_lldp(text: str) -> LldpPeer:
    """`-lldp -g` output -> the peer switch port (`Ifname`), chassis MAC and management IPv4."""
    values = _values(text)
    return LldpPeer(values.get("ifname") or None, values.get("mac") or None, _ip(values.get("ipv4")))


def parse_hccn_conf(text: str) -> dict[int, ConfEntry]:
    """/etc/hccn.conf -> {device id: its entry}; lines of other keys (send_arp_status_N, tls_enable_N) are kept
    out, comments and blank lines skipped."""
    fields: dict[int, dict[str, str]] = {}
    for line in text.splitlines():
        match = _CONF_LINE.match(line)
        if match and not line.lstrip().startswith("#"):
            fields.setdefault(int(match.group(2)), {})[match.group(1)] = match.group(3)
    return {
        device: ConfEntry(
            device, _ip(v.get("address")), _ip(v.get("netmask")), _ip(v.get("netdetect")), _ip(v.get("gateway"))
        )
        for device, v in sorted(fields.items())
    }


# The hccn_tool queries a bundle records per device: the option word -> what it answers. The order is
# vllm-ascend's check list (installation.md, tag v0.25.1rc1): -lldp, -link, -net_health, -netdetect,
# -gateway, then -ip.
HCCN_QUERIES = ("ip", "link", "net_health", "lldp", "netdetect", "gateway")


__all__ = [
    "HCCN_QUERIES",
    "ConfEntry",
    "DeviceAddress",
    "LldpPeer",
    "parse_hccn_conf",
    "parse_ip",
    "parse_link",
    "parse_lldp",
    "parse_net_health",
]
