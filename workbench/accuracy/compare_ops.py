"""The op suite as one typed use case: what `ascend-workbench compare-ops` and notebook 04 both run.

    result = run_compare_ops(CompareOpsRequest(device="auto", ops=("rms_norm",), repros=ReproExport.FAILURES))
    result.suite.table(); result.repros        # one row per op x case x dtype; the single-op scripts written

Every registry op runs on the device in each case's dtype against its native float32 reference on CPU
(docs/METHOD.md §8, §15); the cases to reproduce alone are exported as standalone scripts in one step, so the
verb (the failures) and the notebook (the worst case, to show one) do not each rebuild the sequence.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from workbench import settings
from workbench.accuracy.opsuite import CaseResult, SuiteResult, export_repro, load_cases, run_suite, worst_case
from workbench.errors import WorkbenchError
from workbench.results.verdict import Verdict
from workbench.stack.devices import resolve_device


class ReproExport(str, enum.Enum):
    """Which cases get a single-op reproduction script."""

    NONE = "none"
    FAILURES = "failures"  # every case with an error verdict
    WORST = "worst"  # the case to look at first (worst verdict, then lowest cosine), failing or not


@dataclass(frozen=True)
class CompareOpsRequest:
    """device   auto, cpu, npu:0, cuda:0
    ops      only these registry ops; () = every op of the recipes
    recipes  op-suite YAML files; () = recipes/ops/*.yaml
    repros   which cases to export as single-op scripts
    repro_dir  where they go; None = runs/repros"""

    device: str = "auto"
    ops: tuple[str, ...] = ()
    recipes: tuple[Path, ...] = ()
    repros: ReproExport = ReproExport.NONE
    repro_dir: Path | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.repros, ReproExport):
            try:
                object.__setattr__(self, "repros", ReproExport(self.repros))
            except ValueError:
                choices = ", ".join(r.value for r in ReproExport)
                raise WorkbenchError(f"repros={self.repros!r}: choose {choices}") from None


@dataclass(frozen=True)
class CompareOpsResult:
    suite: SuiteResult
    device: str
    repros: tuple[Path, ...] = ()

    @property
    def failures(self) -> list[CaseResult]:
        return self.suite.failures()

    def write(self, path: Path) -> Path:
        """`compare-ops --json`: the `op-suite` document `regress` reads."""
        return self.suite.write(path, self.device)


def run_compare_ops(request: CompareOpsRequest, *, progress: bool = True) -> CompareOpsResult:
    """Run the suite and export the requested repro scripts; unknown ops and recipes are refused by name."""
    device = resolve_device(request.device)
    cases = load_cases(list(request.recipes) or None, request.ops)
    suite = run_suite(cases, device, progress=progress)
    chosen = {
        ReproExport.NONE: [],
        ReproExport.FAILURES: suite.failures(Verdict.ERROR),
        ReproExport.WORST: [worst_case(suite)],
    }[request.repros]
    out = request.repro_dir or settings.run_dir("repros")
    return CompareOpsResult(suite, str(device), tuple(export_repro(case, Path(out)) for case in chosen))
