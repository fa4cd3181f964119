"""The import result as text for the terminal: containers and their settings with file:line, files not
read, the release and why, what must change, the recipes, and the ported files' diffs and lint."""

from __future__ import annotations

from collections import Counter
from typing import Any


def render(result: Any, diffs: bool = True) -> str:
    """`result` is an `ImportResult` (not imported here: the API imports this module)."""
    read = result.read
    lines = [
        f"import: {len(read.containers)} engine container(s) in {len(read.read)} file(s) read, "
        f"{len(read.not_read)} not read, {result.seconds:.2f} s"
    ]
    for container in read.containers:
        lines += ["", f"{container.name}  [{container.launcher}; {container.source}:{container.line}]"]
        lines += [f"  {s.key} = {s.value}    <- {s.trace()}" for s in container.settings()]
        lines += [f"  note: {n}" for n in container.notes]
    if read.companions:
        lines += [
            "",
            "GPU containers that run no server (ported with their pods): " + ", ".join(c.name for c in read.companions),
        ]
    if result.pick is not None:
        pick = result.pick
        lines += [
            "",
            f"Release: vllm-ascend {pick.release} (vLLM {pick.vllm}); holds the service at: {', '.join(pick.holding) or 'none'}",
        ]
        lines += [f"  why: {r.text}" + (f" [{r.cite}]" if r.cite else "") for r in pick.reasons]
        lines += [f"  change: {c.text}" + (f" [{c.cite}]" if c.cite else "") for c in pick.changes]
    lines += ["", f"Recipes ({len(result.recipes)}): " + ", ".join(r.name for r in result.recipes)]
    if read.not_read:
        reasons = Counter(n.reason for n in read.not_read)
        lines += ["", "Not read:"] + [f"  {n} file(s): {reason}" for reason, n in reasons.most_common()]
        lines += [f"  {n.path}" for n in read.not_read[:15]] + (
            [f"  ... {len(read.not_read) - 15} more (all in the JSON)"] if len(read.not_read) > 15 else []
        )
    lines += [f"note: {n}" for n in result.notes]
    for ported in result.ported:
        lines += ["", f"Ported {ported.source} -> {ported.target} ({len(ported.changes)} change(s))"]
        lines += [f"  {c.setting}: {c.before!r} -> {c.after!r}: {c.why} [{c.method}; {c.cite}]" for c in ported.changes]
        lines += [f"  NOT APPLIED: {e.action} {e.old!r} at line {e.line}" for e in ported.not_applied]
        if diffs:
            lines += [ported.diff]
    for row in result.ported_lint:
        state = "lints clean" if not row["errors"] else f"{len(row['errors'])} error(s): " + "; ".join(row["errors"])
        lines.append(f"ported {row['container']} at {row['release']}: {state}")
    return "\n".join(lines)
