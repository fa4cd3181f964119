"""The kinds of result document the accuracy domain writes (light: `regress` reads them without torch)."""

from __future__ import annotations

from workbench.results.envelope import DocumentKind

OP_SUITE_KIND = DocumentKind("op-suite")  # compare-ops --json: counts and one row per op/case/dtype
DUMP_COMPARE_KIND = DocumentKind("dump-compare")  # compare-dumps --json: summary and one row per tensor
