"""A triage report as text for the terminal and as a JSON-ready dict (`triage --json`)."""

from __future__ import annotations

from typing import Any

from workbench.triage.frames import calling_frame
from workbench.triage.report import ErrorEvent, TriageReport

LATER_SHOWN = 8  # later events listed in the text report (the JSON has all)


def _where(event: ErrorEvent) -> str:
    block = event.block
    when = event.block.time.iso() if event.block.time else "no time in the log"
    return f"{block.place.describe()} at {when}, {block.source}:{block.first_line}"


def _event_lines(event: ErrorEvent) -> list[str]:
    d, block = event.diagnosis, event.block
    lines = [f"  [{d.kind.value}] {d.meaning}", f"  decided by: {d.basis}"]
    lines += [f"  code: {c}" for c in d.codes]
    if block.operators:
        op = f" (suite op {d.suite_op})" if d.suite_op else ""
        lines.append(f"  operator: {', '.join(block.operators[:3])}{op}")
    if block.frames:
        lines.append(f"  called from: {calling_frame(block.frames)}")
    if block.exception:
        lines.append(f"  exception: {block.exception[:300]}")
    if not d.known:
        lines += ["  lines read (none names a cause the knowledge base knows):"]
        lines += [f"    {line[:200]}" for line in d.evidence]
    return lines


def _advice(event: ErrorEvent) -> list[str]:
    d = event.diagnosis
    lines = [f"  what it is: {d.summary}", "  likely causes (most likely first):"]
    lines += [f"    {n}. {cause}" for n, cause in enumerate(d.causes, 1)]
    lines += [f"  fix: {d.fix}", f"  verify: {d.verify}"]
    lines.append("  method: docs/METHOD.md " + ", ".join(f"§{n}" for n in d.method))
    lines += [f"  source: {url}" for url in d.cites]
    return lines


def render_text(report: TriageReport) -> str:
    """What the verb prints: inputs, the stack of any collect_env paste, the first error with its advice,
    then the later events one line each."""
    kinds = sorted({f.kind.value for f in report.inputs})
    out = [f"read {len(report.inputs)} file(s) ({', '.join(kinds) or 'none'})"]
    out += [f"{p.path}: {p.reason}" for p in report.problems]
    out += [f"stack ({s.source}): {s.stack.summary()}" for s in report.stacks]
    if report.first is None:
        out.append("no error found in the logs")
        return "\n".join(out)
    out.append(f"first error: {_where(report.first)}")
    out += _event_lines(report.first) + _advice(report.first)
    later = report.later
    if later:
        out.append(f"later errors ({len(later)}; usually consequences of the first):")
        for event in later[:LATER_SHOWN]:
            code = f" {event.diagnosis.code}" if event.diagnosis.code else ""
            out.append(f"  - [{event.diagnosis.kind.value}]{code} {_where(event)}")
        if len(later) > LATER_SHOWN:
            out.append(f"  ... {len(later) - LATER_SHOWN} more (--json lists all)")
    return "\n".join(out)


def event_dict(event: ErrorEvent) -> dict[str, Any]:
    d, block = event.diagnosis, event.block
    frame = calling_frame(block.frames)
    return {
        "kind": d.kind.value,
        "basis": d.basis,
        "code": str(d.code) if d.code else None,
        "codes": list(d.codes),
        "meaning": d.meaning,
        "summary": d.summary,
        "causes": list(d.causes),
        "fix": d.fix,
        "verify": d.verify,
        "suite_op": d.suite_op,
        "method": list(d.method),
        "cites": list(d.cites),
        "consequence": d.consequence,
        "known": d.known,
        "evidence": list(d.evidence),
        "operators": list(block.operators),
        "frame": str(frame) if frame else None,
        "exception": block.exception,
        "place": {
            "pid": block.place.pid,
            "device": block.place.device,
            "rank": block.place.rank,
            "worker": block.place.worker,
        },
        "time": block.time.iso() if block.time else None,
        "source": block.source,
        "lines": [block.first_line, block.last_line],
        "block": list(block.lines),
    }


def report_dict(report: TriageReport) -> dict[str, Any]:
    return {
        "inputs": [{"path": str(f.path), "kind": f.kind.value} for f in report.inputs],
        "problems": [{"path": str(p.path), "reason": p.reason} for p in report.problems],
        "stacks": [
            {"source": s.source, "summary": s.stack.summary(), "stack": s.stack.as_stack(), "env": s.stack.env}
            for s in report.stacks
        ],
        "first_error": event_dict(report.first) if report.first else None,
        "events": [event_dict(e) for e in report.events],
        "knowledge_base": str(report.knowledge_base) if report.knowledge_base else None,
    }


def timeline_rows(report: TriageReport) -> list[dict[str, Any]]:
    """One row per error event in time order, the first error marked: the table a notebook shows."""
    rows = []
    for event in report.events:
        d, block = event.diagnosis, event.block
        rows.append(
            {
                "first": "◀ first" if event is report.first else ("consequence" if d.consequence else ""),
                "time": block.time.iso() if block.time else None,
                "where": block.place.describe(),
                "kind": d.kind.value,
                "code": str(d.code) if d.code else None,
                "operator": ", ".join(block.operators[:2]) or None,
                "log": f"{block.source}:{block.first_line}",
            }
        )
    return rows


def first_error_rows(report: TriageReport) -> list[dict[str, str]]:
    """The first error as (what, value) rows: code, meaning, operator, place, caller, causes, fix, verify."""
    if report.first is None:
        return [{"what": "first error", "value": "no error found in the logs"}]
    d, block = report.first.diagnosis, report.first.block
    frame = calling_frame(block.frames)
    rows = [
        ("kind", d.kind.value),
        ("code", ", ".join(str(c) for c in d.codes) or "none in the log"),
        ("what it is", d.summary),
        ("operator", ", ".join(block.operators[:3]) or "not named"),
        ("where", _where(report.first)),
        ("called from", str(frame) if frame else "no Python frame in the log"),
    ]
    rows += [(f"cause {n}", cause) for n, cause in enumerate(d.causes, 1)]
    rows += [("fix", d.fix), ("verify", d.verify), ("method", "docs/METHOD.md " + ", ".join(f"§{n}" for n in d.method))]
    return [{"what": what, "value": value} for what, value in rows]
