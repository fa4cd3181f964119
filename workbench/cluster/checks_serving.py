"""Rules over the serve commands: data-parallel flags that fit together, engine flags equal across an
instance, prefill and decode connectors that agree, and timeouts that fire in an order that names the cause."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workbench.cluster.findings import ClusterFinding, describe_values, finding, groups, minority
from workbench.cluster.node import NodeView
from workbench.cluster.rules import Rule

PRODUCERS = ("kv_producer", "kv_both")
CONSUMERS = ("kv_consumer", "kv_both")


def _dp_groups(views: Sequence[NodeView]) -> list[list[NodeView]]:
    """Serving nodes of one data-parallel deployment: same model, same connector role, same --data-parallel-size.

    Grouped by what the nodes serve rather than by the address they name, so a node that names the wrong
    master address is caught here instead of forming a group of its own.
    """
    found: dict[tuple[Any, ...], list[NodeView]] = {}
    for v in views:
        if v.serving and (v.dp_size > 1 or v.headless):
            found.setdefault((v.model, v.kv_role, v.dp_size), []).append(v)
    return list(found.values())


def _same(rule: Rule, group: list[NodeView], flag: str, values: dict[str, Any]) -> list[ClusterFinding]:
    if len(set(values.values())) <= 1:
        return []
    detail = f"give every node the same {flag} (the master's address and port); now {describe_values(values)}"
    return [
        finding(rule, minority(values), flag, f"differs across the group: {describe_values(values)}", detail=detail)
    ]


def _ranks(rule: Rule, group: list[NodeView]) -> list[ClusterFinding]:
    """Start ranks must tile 0..size-1 with each node's local size; the local sizes must add up to the size."""
    size = max(v.dp_size for v in group)
    found = []
    total = sum(v.dp_local for v in group)
    if total != size:
        locals_ = describe_values({v.name: v.dp_local for v in group})
        detail = f"make the nodes' --data-parallel-size-local add up to --data-parallel-size {size} (now {locals_})"
        found.append(
            finding(
                rule,
                [v.name for v in group],
                "--data-parallel-size-local",
                f"local sizes add up to {total}, not {size}",
                detail=detail,
            )
        )
    expected = 0
    for v in sorted(group, key=lambda v: (v.dp_start_rank, v.headless)):
        if v.dp_start_rank != expected:
            detail = (
                f"set --data-parallel-start-rank {expected} on {v.name} (the ranks before it are 0..{expected - 1})"
            )
            message = f"starts at rank {v.dp_start_rank}, expected {expected}"
            found.append(finding(rule, v.name, "--data-parallel-start-rank", message, detail=detail))
        expected = max(expected, v.dp_start_rank) + v.dp_local
    return found


def _master(rule: Rule, group: list[NodeView]) -> list[ClusterFinding]:
    external = [v for v in group if v.flag("--data-parallel-rank") is not None]
    if external:
        bad = [v for v in external if v.dp_local != 1]
        return [
            finding(
                rule,
                v.name,
                "--data-parallel-size-local",
                "an external-LB rank serves exactly one local rank",
                detail="set --data-parallel-size-local 1 (or drop it) with --data-parallel-rank",
            )
            for v in bad
        ]
    masters = [v for v in group if not v.headless]
    if len(masters) == 1:
        return []
    if not masters:
        detail = "drop --headless on the node whose --data-parallel-address is its own (rank 0)"
        return [
            finding(
                rule,
                [v.name for v in group],
                "--headless",
                "every node is headless: nobody serves the API",
                detail=detail,
            )
        ]
    followers = [v for v in masters if v.dp_start_rank != 0]
    detail = "add --headless to every node but the master (the node with --data-parallel-start-rank 0)"
    message = f"{len(masters)} nodes start an API server and an engine coordinator; only the master may"
    return [finding(rule, [v.name for v in (followers or masters)], "--headless", message, detail=detail)]


def data_parallel(rule: Rule, views: Sequence[NodeView]) -> list[ClusterFinding]:
    found = []
    for group in _dp_groups(views):
        found += _same(rule, group, "--data-parallel-size", {v.name: v.dp_size for v in group})
        found += _same(rule, group, "--data-parallel-address", {v.name: v.dp_address for v in group})
        found += _same(rule, group, "--data-parallel-rpc-port", {v.name: v.dp_rpc_port for v in group})
        found += _master(rule, group)
        if not any(f.setting == "--data-parallel-size" for f in found):
            found += _ranks(rule, group)
    return found


def flags_equal(rule: Rule, views: Sequence[NodeView]) -> list[ClusterFinding]:
    found = []
    for group in groups([v for v in views if v.serving], rule.scope):
        if len(group) < 2:
            continue
        for setting in rule.settings:
            values = {v.name: (v.model if setting == "model" else v.flags.get(setting, "(unset)")) for v in group}
            if len(set(values.values())) > 1:
                message = f"differs within instance {group[0].instance}: {describe_values(values)}"
                found.append(finding(rule, minority(values), setting, message, values=describe_values(values)))
    return found


def _extra(view: NodeView) -> dict[str, Any]:
    return dict((view.kv_transfer or {}).get("kv_connector_extra_config") or {})


def kv_connector(rule: Rule, views: Sequence[NodeView]) -> list[ClusterFinding]:
    joined = [v for v in views if v.kv_transfer]
    if len(joined) < 2:
        return []
    found = []
    for key in ("kv_connector", "kv_connector_module_path"):
        values = {v.name: v.kv_transfer.get(key) for v in joined}  # type: ignore[union-attr]
        if len(set(values.values())) > 1:
            detail = f"use one {key} on prefill and decode (now {describe_values(values)})"
            found.append(finding(rule, minority(values), f"--kv-transfer-config.{key}", "differs", detail=detail))
    roles = {v.name: v.kv_role for v in joined}
    if not any(r in PRODUCERS for r in roles.values()) or not any(r in CONSUMERS for r in roles.values()):
        detail = f"give prefill nodes kv_role kv_producer and decode nodes kv_consumer (now {describe_values(roles)})"
        found.append(
            finding(rule, list(roles), "--kv-transfer-config.kv_role", "no producer/consumer pair", detail=detail)
        )
    paths = {
        v.name: _extra(v).get("shared_storage_path")
        for v in joined
        if v.kv_transfer.get("kv_connector") == "ExampleConnector"
    }  # type: ignore[union-attr]
    if len(set(paths.values())) > 1:
        detail = f"point every ExampleConnector at one shared_storage_path (now {describe_values(paths)})"
        found.append(
            finding(
                rule,
                minority(paths),
                "--kv-transfer-config.kv_connector_extra_config.shared_storage_path",
                "prefill writes where decode does not read",
                detail=detail,
            )
        )
    return found + _sizes(rule, joined)


def _sizes(rule: Rule, joined: list[NodeView]) -> list[ClusterFinding]:
    """Mooncake-style extra config names each side's dp_size / tp_size: they must be the sides' real sizes."""
    found = []
    actual = {
        "prefill": [v for v in joined if v.kv_role == "kv_producer"],
        "decode": [v for v in joined if v.kv_role == "kv_consumer"],
    }
    for v in joined:
        for side, nodes in actual.items():
            stated = _extra(v).get(side)
            if not isinstance(stated, dict) or not nodes:
                continue
            for key, real in (("dp_size", nodes[0].dp_size), ("tp_size", nodes[0].tp)):
                if key in stated and int(stated[key]) != real:
                    setting = f"--kv-transfer-config.kv_connector_extra_config.{side}.{key}"
                    detail = f"set {side}.{key} to {real} (the {side} nodes run {key.split('_')[0]}={real})"
                    found.append(
                        finding(
                            rule, v.name, setting, f"says {stated[key]}, the {side} side runs {real}", detail=detail
                        )
                    )
    return found


def timeouts(rule: Rule, views: Sequence[NodeView]) -> list[ClusterFinding]:
    """Only pairs the node sets one side of: vLLM's and CANN's defaults (300 s against 1800 s) disagree on
    every node, and a warning on every deployment would be noise."""
    found = []
    for v in views:
        for earlier, later, why in rule.pairs:
            if earlier not in v.env and later not in v.env:
                continue
            first, second = _seconds(rule, v, earlier), _seconds(rule, v, later)
            if first is not None and second is not None and first >= second:
                message = f"{earlier} waits {first:g} s, {later} only {second:g} s"
                values = {"earlier": earlier, "later": later, "earlier_value": f"{first:g}", "why": why}
                found.append(finding(rule, v.name, later, message, **values))
    return found


def _seconds(rule: Rule, view: NodeView, name: str) -> float | None:
    """The effective wait of `name` on the node: its value, else the rule's default (HCCL_CONNECT_TIMEOUT
    waits 20 s beyond its value, per CANN's reference)."""
    text = view.env.get(name)
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    if value is None:
        return rule.defaults.get(name)
    return value + 20.0 if name == "HCCL_CONNECT_TIMEOUT" else value


__all__ = ["data_parallel", "flags_equal", "kv_connector", "timeouts"]
