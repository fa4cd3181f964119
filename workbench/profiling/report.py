"""A profile's findings as text (the CLI) and as one JSON record (`--json`, sweep points).

The text always states what the shares mean on this device (model.CPU_MAPPING on CPU), then the
per-rank shares, the verdicts with evidence and fix, the top ops, the host phases, and the notes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from workbench.profiling.profile import Profile
from workbench.profiling.verdicts import ProfileFinding, verdicts_frame
from workbench.results.envelope import DocumentKind, write_result

PROFILE_KIND = DocumentKind("profile")

SHARE_COLUMNS = [
    "rank",
    "steps",
    "total_us",
    "computing_share",
    "communication_share",
    "overlapped_share",
    "free_share",
    "busy_share",
]


def shares_table(profile: Profile) -> pd.DataFrame:
    """Per-rank shares, readable: step time in ms and percentages."""
    ranks = profile.ranks_frame()
    if ranks.empty:
        return ranks
    table = ranks[SHARE_COLUMNS].copy()
    table.insert(2, "mean_step_ms", table["total_us"] / table["steps"].where(table["steps"] > 0) / 1000.0)
    table["total_us"] = table["total_us"] / 1000.0
    table = table.rename(columns={"total_us": "profiled_ms"})
    for column in [c for c in table.columns if c.endswith("_share")]:
        table[column] = (table[column] * 100).round(1)
    return table.rename(columns={c: c.replace("_share", " %") for c in table.columns})


def summary(profile: Profile, verdicts: list[ProfileFinding]) -> dict[str, Any]:
    """The numbers a sweep point or a notebook keeps: per-rank shares (fractions) and the verdict kinds."""
    ranks = profile.ranks_frame()
    return {
        "device": profile.device,
        "mapping": profile.mapping,
        "ranks": int(len(ranks)),
        "steps": int(ranks["steps"].sum()) if not ranks.empty else 0,
        "busy_share": float(ranks["busy_share"].min()) if not ranks.empty else None,
        "computing_share": float(ranks["computing_share"].mean()) if not ranks.empty else None,
        "communication_share": float(ranks["communication_share"].max()) if not ranks.empty else None,
        "free_share": float(ranks["free_share"].max()) if not ranks.empty else None,
        "verdicts": [v.kind.value for v in verdicts],
        "findings": [{"verdict": v.kind.value, "rank": v.rank, "evidence": v.evidence, "fix": v.fix} for v in verdicts],
    }


def format_report(profile: Profile, verdicts: list[ProfileFinding], top: int = 10) -> str:
    """The CLI's text report (see the module docstring)."""
    with pd.option_context("display.width", 160, "display.max_colwidth", 70, "display.max_columns", 20):
        lines = [
            f"profile: {profile.source}  (format {profile.format.value}, device {profile.device})",
            f"mapping: {profile.mapping}",
            "",
            "time shares per rank (% of step time):",
        ]
        shares = shares_table(profile)
        lines.append(shares.to_string(index=False) if not shares.empty else "  (no steps)")
        lines += ["", "verdicts:"]
        for v in verdicts:
            lines.append(f"  [{v.kind.value}] rank {v.rank}: {v.evidence}")
            if v.fix:
                lines.append(f"      fix: {v.fix}")
        ops = profile.ops_frame(top)
        if not ops.empty:
            shown = ops.assign(self_ms=(ops["self_us"] / 1000).round(3), share=(ops["share"] * 100).round(1))
            lines += [
                "",
                f"top {len(ops)} ops by self time (all ranks):",
                shown[["name", "kind", "calls", "self_ms", "share"]].to_string(index=False),
            ]
        host = profile.host_frame()
        if not host.empty:
            shown = host.assign(total_ms=(host["total_us"] / 1000).round(2))
            lines += ["", "host phases:", shown[["rank", "phase", "calls", "total_ms"]].to_string(index=False)]
        if profile.notes:
            lines += ["", "notes:", *[f"  - {n}" for n in profile.notes]]
    return "\n".join(lines)


def report_dict(profile: Profile, verdicts: list[ProfileFinding]) -> dict[str, Any]:
    """The JSON `profile --json` writes: the whole profile, the verdicts, and a summary."""
    return {
        "summary": summary(profile, verdicts),
        "verdicts": verdicts_frame(verdicts).to_dict("records"),
        "profile": profile.to_dict(),
    }


def write_json(profile: Profile, verdicts: list[ProfileFinding], path: Path) -> Path:
    """`report_dict` in the result envelope, atomically: the stamp is the profile's own (`meta.provenance`)."""
    return write_result(Path(path), report_dict(profile, verdicts), profile.meta.get("provenance") or {}, PROFILE_KIND)
