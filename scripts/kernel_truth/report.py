"""The audit's output: counts per kind, runs of refs with the same answer, audit.json and audit.md."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from packaging.version import Version

from scripts.kernel_truth.cells import CHIPS, TagInfo
from scripts.kernel_truth.compare import Finding
from scripts.kernel_truth.mirror import Mirror
from scripts.kernel_truth.vllm_side import OUT_OF_SCOPE

KINDS = ("different kernel", "different arguments", "different tag", "missing condition", "own kernel undeclared")


def counts(findings: list[Finding]) -> dict[str, dict[str, int]]:
    total: Counter = Counter()
    acknowledged: Counter = Counter()
    for f in findings:
        for kind in set(f.kinds):
            total[kind] += 1
            if f.acknowledged:
                acknowledged[kind] += 1
    return {
        "cells": {"total": len(findings), "agree": sum(1 for f in findings if not f.kinds)},
        "disagreements": {k: total.get(k, 0) for k in KINDS},
        "acknowledged": {k: acknowledged.get(k, 0) for k in KINDS},
    }


def runs(findings: list[Finding]) -> list[dict[str, Any]]:
    """Consecutive tags of one series with the same answer on both sides, as one record."""
    out: list[dict[str, Any]] = []
    by_series: dict[tuple, list[Finding]] = defaultdict(list)
    for f in findings:
        by_series[f.series].append(f)
    for _key, items in by_series.items():
        current: dict[str, Any] | None = None
        for f in items:
            signature = (
                f.vllm_text(),
                f.table_kernel,
                f.table_recipe,
                f.table_row,
                tuple(sorted(set(f.kinds))),
                tuple(f.details),
            )
            if current is not None and current["_sig"] == signature:
                current["last"] = f.tag
                continue
            current = {
                "op": f.op,
                "chip": f.chip,
                "graph": f.graph + (" + pa_shape_list" if f.pa_shape else ""),
                "call": f.call,
                "first": f.tag,
                "last": f.tag,
                "vllm_ascend": f.vllm_text(),
                "where": list(f.vllm.where),
                "entry": f.vllm.entry,
                "table": f.table_kernel,
                "recipe": f.table_recipe,
                "row": f.table_row,
                "kinds": sorted(set(f.kinds)),
                "details": list(f.details),
                "scoped": list(f.vllm.scoped),
                "acknowledged": f.acknowledged,
                "_sig": signature,
            }
            out.append(current)
    for record in out:
        record.pop("_sig")
    return out


def write(out_dir: Path, findings: list[Finding], tags: list[TagInfo], mirror: Mirror, elapsed: float) -> dict:
    summary = counts(findings)
    data = {
        "about": "Kernel-table audit: each cell's calls in vllm-ascend's source next to ascend_backend.platform.kernels.select(); "
        "written by scripts/kernel_truth (python -m scripts.kernel_truth).",
        "mirror": {"main": mirror.commit("main"), "tags": [t.ref for t in tags]},
        "seconds": round(elapsed),
        "chips_known": {t.ref: {c: why or "known" for c, why in t.chips.items()} for t in tags},
        "counts": summary,
        "out_of_scope": OUT_OF_SCOPE,
        "runs": runs(findings),
    }
    render(out_dir, data)
    return summary


def compact(data: dict) -> dict:
    """The stored form: each walk's entry point and each acknowledgement's reason once, runs pointing at them."""
    if "entries" in data:
        return data
    entries: list[str] = []
    reasons: dict[str, str] = {}
    runs_out = []
    for r in data["runs"]:
        r = dict(r)
        if r["entry"] not in entries:
            entries.append(r["entry"])
        r["entry"] = entries.index(r["entry"])
        if r["acknowledged"]:
            key = r["row"] or f"{r['op']} (refused)"
            reasons.setdefault(key, r["acknowledged"])
            r["acknowledged"] = key
        runs_out.append(r)
    merged: dict[str, dict] = {}  # graph modes with the same answer share a record ("graph" lists them)
    for r in runs_out:
        key = json.dumps({k: v for k, v in r.items() if k != "graph"}, sort_keys=True)
        if key in merged:
            merged[key]["graph"].append(r["graph"])
        else:
            merged[key] = {**r, "graph": [r["graph"]]}
    rest = {k: v for k, v in data.items() if k != "runs"}
    return {**rest, "entries": entries, "reasons": reasons, "runs": list(merged.values())}


def graph_modes_of(record: dict) -> list[str]:
    return record["graph"] if isinstance(record["graph"], list) else [record["graph"]]


def render(out_dir: Path, data: dict) -> None:
    """audit.json (one run per line, so a rerun's diff shows the runs that changed) and audit.md."""
    data = compact(data)
    out_dir.mkdir(parents=True, exist_ok=True)
    head = {k: v for k, v in data.items() if k != "runs"}
    text = json.dumps(head, indent=1)[:-2] + ',\n "runs": [\n'
    text += ",\n".join("  " + json.dumps(r, ensure_ascii=False) for r in data["runs"]) + "\n ]\n}\n"
    (out_dir / "audit.json").write_text(text)
    (out_dir / "audit.md").write_text(markdown(data, data.get("seconds", 0)))


def markdown(data: dict, elapsed: float) -> str:
    c = data["counts"]
    lines = [
        "# Kernel truth: the selection table against vllm-ascend's source",
        "",
        "Written by `python -m scripts.kernel_truth` (scripts/kernel_truth/); do not edit by hand. Every cell is an op at a",
        "tag on a chip (and, for attention and the cache write, a graph mode and a head size): the calls vllm-ascend's",
        "code makes there, found by walking it from the layer or backend it registers, next to what",
        "`ascend_backend.platform.kernels.select()` returns. Where vllm-ascend's default is its own `_C_ascend` or Triton",
        "kernel, the comparison is with its torch_npu path and the row must name the default.",
        "",
        f"Mirror: main at `{data['mirror']['main'][:12]}`; {len(data['mirror']['tags'])} refs; {c['cells']['total']} cells, "
        f"{c['cells']['agree']} agree.",
        "",
        "| kind | cells | of which acknowledged by the row (`differs`) |",
        "|---|---|---|",
    ]
    for kind in KINDS:
        lines.append(f"| {kind} | {c['disagreements'][kind]} | {c['acknowledged'][kind]} |")
    lines += ["", "## Chips vllm-ascend knows per tag", "", "| ref | A2 | A3 | A5 | 310P |", "|---|---|---|---|---|"]
    for ref, chips in data["chips_known"].items():
        lines.append(f"| {ref} | " + " | ".join("yes" if chips[ch] == "known" else "no" for ch in CHIPS) + " |")
    lines += [
        "",
        "## Disagreements",
        "",
        "Grouped by op, chip and answer; each group lists the refs, graph modes and calls it covers.",
        "",
    ]
    groups: dict[tuple, list[dict]] = defaultdict(list)
    reasons = data.get("reasons", {})
    for r in data["runs"]:
        if r["kinds"]:
            ack = reasons.get(r["acknowledged"], r["acknowledged"])
            key = (r["op"], r["chip"], tuple(r["kinds"]), r["vllm_ascend"], r["table"], r["row"], ack)
            groups[key].append(r)
    if not groups:
        lines.append("None.")
    for (op, chip, kinds, vllm, table, row, ack), items in groups.items():
        spans = sorted(
            {r["first"] if r["first"] == r["last"] else f"{r['first']} … {r['last']}" for r in items}, key=ref_order
        )
        graphs = sorted({g for r in items for g in graph_modes_of(r)})
        calls = sorted({r["call"] for r in items})
        lines.append(
            f"- **{op}** {chip}: {', '.join(kinds)}. vllm-ascend: {vllm}; table: {table} (`{row or 'no row'}`). "
            f"Refs {', '.join(spans)}; graph {', '.join(graphs)}; call {'; '.join(calls)}."
        )
        details = []
        for r in items:
            for detail in r["details"]:
                if detail not in details:
                    details.append(detail)
        for detail in details[:5]:
            lines.append(f"  - {detail}")
        if len(details) > 5:
            lines.append(f"  - … {len(details) - 5} more in audit.json")
        if ack:
            lines.append(f"  - acknowledged by the row: {ack}")
    lines += ["", "## Out-of-scope conditions (found, not table keys)", ""]
    for label, why in data["out_of_scope"].items():
        lines.append(f"- `{label}`: {why}")
    lines += [
        "",
        "## Every series",
        "",
        "Per op, chip, call and span of refs: vllm-ascend's calls, the table's kernel and row (✗: a disagreement,",
        "listed above); graph modes with the same answer share a line (any: all five modes the audit tries).",
        "",
        "| op | chip | graph | call | refs | vllm-ascend | table | row |",
        "|---|---|---|---|---|---|---|---|",
    ]
    series: dict[tuple, list[str]] = defaultdict(list)
    for r in data["runs"]:
        span = r["first"] if r["first"] == r["last"] else f"{r['first']} … {r['last']}"
        mark = "" if not r["kinds"] else " ✗"
        key = (r["op"], r["chip"], r["call"], span, f"{r['vllm_ascend']}{mark}", r["table"], r["row"])
        series[key] += graph_modes_of(r)
    modes = {g for r in data["runs"] for g in graph_modes_of(r)}
    for (op, chip, call, span, vllm, table, row), graphs in series.items():
        graph = "any" if len(modes) > 1 and set(graphs) == modes else ", ".join(graphs)
        lines.append(f"| {op} | {chip} | {graph} | {call} | {span} | {vllm} | {table} | {row} |")
    lines += ["", f"(audit took {elapsed:.0f} s)", ""]
    return "\n".join(lines)


def ref_order(span: str) -> tuple:
    """'v0.13.0rc1 … main' -> by its first ref, then its last (spans sharing a first ref came out in set order)."""
    return tuple((1, Version("0")) if ref == "main" else (0, Version(ref.lstrip("v"))) for ref in span.split(" … "))
