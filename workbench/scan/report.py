"""A finished scan: the findings, the problems, and the tables a porting engineer reads first —
counts by category and severity, by file, by rule (with what replaces it and how to verify)."""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from workbench.scan.findings import Category, CudaTie, ScanProblem, Severity
from workbench.scan.placement import Tier

if TYPE_CHECKING:
    import pandas as pd

SEVERITY_ORDER = sorted(Severity, key=lambda s: s.rank)  # blocks, unknown, change, works
FINDING_COLUMNS = [
    "tier",
    "file",
    "line",
    "column",
    "rule",
    "category",
    "severity",
    "excerpt",
    "detail",
    "counterpart",
    "verify",
]


@dataclass(frozen=True)
class ScanReport:
    paths: tuple[str, ...]
    findings: tuple[CudaTie, ...]
    problems: tuple[ScanProblem, ...]
    files_scanned: int
    skipped: tuple[tuple[str, int], ...]  # (reason, count)
    seconds: float
    jobs: int
    mapping: str  # the mapping table the findings were joined with
    complete: bool = True  # False when the scan was interrupted: what is here was scanned
    not_scanned: tuple[tuple[str, str], ...] = ()  # (file, reason): every file the scan did not read, named

    # -- counts (plain Python, so the CLI and JSON need no pandas) ---------------------------------
    def severity_counts(self) -> dict[str, int]:
        counts = collections.Counter(f.severity for f in self.findings)
        return {s.value: counts[s] for s in SEVERITY_ORDER}

    def category_counts(self) -> list[dict[str, Any]]:
        """One row per category: total and per severity, most work first."""
        rows: dict[Category, collections.Counter] = collections.defaultdict(collections.Counter)
        for finding in self.findings:
            rows[finding.category][finding.severity] += 1
        table = [
            {"category": c.value, "findings": sum(n.values()), **{s.value: n[s] for s in SEVERITY_ORDER}}
            for c, n in rows.items()
        ]
        return sorted(table, key=lambda r: (-r["blocks"], -r["findings"], r["category"]))

    def tier_counts(self) -> list[dict[str, Any]]:
        """One row per tier (engine first): findings, files and per severity."""
        rows = []
        for tier in Tier:
            found = [f for f in self.findings if f.tier == tier.value]
            if found:
                counts = collections.Counter(f.severity for f in found)
                rows.append(
                    {
                        "tier": tier.value,
                        "findings": len(found),
                        "files": len({f.file for f in found}),
                        **{s.value: counts[s] for s in SEVERITY_ORDER},
                    }
                )
        return rows

    def file_counts(self) -> list[dict[str, Any]]:
        """One row per file: total, per severity, and its categories."""
        rows: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        categories: dict[str, set[str]] = collections.defaultdict(set)
        tiers: dict[str, str] = {}
        for finding in self.findings:
            rows[finding.file][finding.severity] += 1
            categories[finding.file].add(finding.category.value)
            tiers[finding.file] = finding.tier
        table = [
            {
                "tier": tiers[f],
                "file": f,
                "findings": sum(n.values()),
                **{s.value: n[s] for s in SEVERITY_ORDER},
                "categories": ", ".join(sorted(categories[f])),
            }
            for f, n in rows.items()
        ]
        return sorted(table, key=lambda r: (Tier(r["tier"]).rank, -r["blocks"], -r["findings"], r["file"]))

    def rule_counts(self) -> list[dict[str, Any]]:
        """One row per rule seen: count, files, and the mapping's counterpart and verify step."""
        first: dict[str, CudaTie] = {}
        counts: collections.Counter[str] = collections.Counter()
        files: dict[str, set[str]] = collections.defaultdict(set)
        for finding in self.findings:
            first.setdefault(finding.rule, finding)
            counts[finding.rule] += 1
            files[finding.rule].add(finding.file)
        table = [
            {
                "rule": r,
                "category": first[r].category.value,
                "severity": first[r].severity.value,
                "findings": n,
                "files": len(files[r]),
                "counterpart": first[r].counterpart,
                "verify": first[r].verify,
            }
            for r, n in counts.items()
        ]
        return sorted(table, key=lambda r: (Severity(r["severity"]).rank, -r["findings"], r["rule"]))

    def problem_counts(self) -> dict[str, int]:
        return dict(collections.Counter(p.kind.value for p in self.problems).most_common())

    def summary(self) -> dict[str, Any]:
        """Everything a dashboard or the JSON file needs, without the individual findings."""
        return {
            "files_scanned": self.files_scanned,
            "findings": len(self.findings),
            "files_with_findings": len({f.file for f in self.findings}),
            "seconds": round(self.seconds, 3),
            "findings_per_second": round(len(self.findings) / self.seconds, 1) if self.seconds > 0 else None,
            "complete": self.complete,
            "by_severity": self.severity_counts(),
            "by_category": self.category_counts(),
            "by_rule": [{k: r[k] for k in ("rule", "findings", "files")} for r in self.rule_counts()],
            "by_tier": self.tier_counts(),
            "by_file": self.file_counts(),
            "problems": self.problem_counts(),
            "skipped": dict(self.skipped),
            "not_scanned": [{"file": f, "reason": r} for f, r in self.not_scanned],
        }

    def headline(self) -> str:
        counts = self.severity_counts()
        state = "" if self.complete else " (interrupted: partial)"
        return (
            f"{len(self.findings)} findings in {len({f.file for f in self.findings})} of {self.files_scanned} files "
            f"scanned in {self.seconds:.1f} s{state}: "
            + ", ".join(f"{n} {s}" for s, n in counts.items())
            + (f"; {len(self.problems)} scan problems" if self.problems else "")
        )

    # -- tables (pandas, for notebooks) ----------------------------------------------------------
    def table(self) -> pd.DataFrame:
        """Every finding, sorted by file and line."""
        import pandas as pd

        return pd.DataFrame([f.as_row() for f in self.findings], columns=FINDING_COLUMNS)

    def by_category(self) -> pd.DataFrame:
        import pandas as pd

        columns = ["category", "findings", *(s.value for s in SEVERITY_ORDER)]
        return pd.DataFrame(self.category_counts(), columns=columns)

    def by_file(self) -> pd.DataFrame:
        import pandas as pd

        columns = ["tier", "file", "findings", *(s.value for s in SEVERITY_ORDER), "categories"]
        return pd.DataFrame(self.file_counts(), columns=columns)

    def by_tier(self) -> pd.DataFrame:
        import pandas as pd

        columns = ["tier", "findings", "files", *(s.value for s in SEVERITY_ORDER)]
        return pd.DataFrame(self.tier_counts(), columns=columns)

    def not_scanned_table(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(list(self.not_scanned), columns=["file", "reason"])

    def by_rule(self) -> pd.DataFrame:
        import pandas as pd

        columns = ["rule", "category", "severity", "findings", "files", "counterpart", "verify"]
        return pd.DataFrame(self.rule_counts(), columns=columns)

    def findings_by_file(self) -> pd.DataFrame:
        """The findings indexed by (file, line), the way a reviewer walks a code base."""
        columns = ["tier", "rule", "severity", "excerpt", "counterpart", "verify", "detail"]
        return self.table().set_index(["file", "line"])[columns]

    def problems_table(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame([p.as_row() for p in self.problems], columns=["path", "kind", "line", "message"])
