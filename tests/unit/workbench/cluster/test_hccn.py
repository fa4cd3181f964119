"""The hccn_tool and /etc/hccn.conf parsers on real outputs (tests/fixtures/cluster/hccn/SOURCES.md)."""

from __future__ import annotations

from tests.conftest import FIXTURES
from workbench.cluster.hccn import parse_hccn_conf, parse_ip, parse_link, parse_lldp, parse_net_health

HCCN = FIXTURES / "cluster" / "hccn"


def read(name: str) -> str:
    return (HCCN / name).read_text(encoding="utf-8")


def test_ip_address_and_mask():
    assert parse_ip(read("ip-arthurchiao.txt")).address == "29.1.112.213"
    assert parse_ip(read("ip-arthurchiao.txt")).netmask == "255.255.0.0"
    assert parse_ip(read("ip-vllm-omni.txt")).address == "10.86.1.80"


def test_device_without_address_keeps_the_message():
    parsed = parse_ip(read("ip-unset.txt"))
    assert parsed.address is None
    assert parsed.problem == "Get ipconf failed, because no ip was preset there!"


def test_link_and_health():
    assert parse_link(read("link-up.txt")) == "UP"
    assert parse_link("link status: down") == "DOWN"
    assert parse_net_health(read("net-health-success.txt")) == "Success"
    assert parse_net_health(read("net-health-fault.txt")) == "Fault"
    assert parse_link("") is None and parse_net_health("") is None


def test_lldp_peer_port_with_elided_fields():
    peer = parse_lldp(read("lldp-arthurchiao.txt"))
    assert peer.ifname == "400GE1/1/20:2"
    assert peer.chassis == "..."  # the page elides the MAC
    assert peer.management_ip is None  # "26.xx.xx.xx" is no address


def test_hccn_conf_with_elided_devices():
    conf = parse_hccn_conf(read("hccn-arthurchiao.conf"))
    assert sorted(conf) == [0, 7]
    assert conf[0].address == "29.1.137.205" and conf[0].netmask == "255.255.0.0"
    assert conf[0].netdetect == "29.1.0.1" and conf[0].gateway == "29.1.0.1"
    assert conf[7].address == "29.1.170.143"


def test_placeholder_conf_has_no_addresses():
    conf = parse_hccn_conf(read("hccn-cann-template.conf"))
    assert conf[0].address is None and conf[0].netmask is None


def test_comments_and_other_keys_are_skipped():
    conf = parse_hccn_conf("# address_0=1.1.1.1\nsend_arp_status_3=1\naddress_3=10.0.0.3\ntls_enable_3=0\n")
    assert list(conf) == [3] and conf[3].address == "10.0.0.3"
