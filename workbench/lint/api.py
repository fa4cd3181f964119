"""The lint API: one use case for `ascend-workbench lint`, notebook 02 and the recipe verbs (docs/METHOD.md §2, §16).

    result = run_lint(LintRequest(source="serve.sh", release="v0.11.0", to="v0.13.0"))
    print(result.text())                       # the findings, the upgrade's changes, the migrated copy's diff
    result.write("lint.json")                  # a typed document (kind "lint")
    result.report.table()                      # one row per setting (pandas)

    check_recipe(recipe)                       # serve / bench / sweep / bisect: errors stop here
    lint_checkpoint("/ckpt", release="0.18.0") # will the release load this quantized checkpoint?

The input is read once (`inputs.read_input`): '-' reads standard input a single time however many views
(`--to`, `--fix`) the request asks for.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from workbench.errors import WorkbenchError
from workbench.lint import fix as fix_mod
from workbench.lint.checkpoint import CheckpointFinding, findings_text, lint_checkpoint, verdicts
from workbench.lint.command import LintInputError, ParsedInput
from workbench.lint.findings import Finding, FindingKind
from workbench.lint.inputs import LintInput, Reader, read_input, recipe_settings
from workbench.lint.judge import judge
from workbench.lint.judge_base import Target, served_model
from workbench.lint.models import identify
from workbench.lint.release import installed, resolve_target, vllm_for_tag
from workbench.lint.reports import LintReport, UpgradeReport
from workbench.lint.text import checkpoint_text, report_text
from workbench.results.envelope import DocumentKind, write_result
from workbench.truth.table import MAIN, ConfigTable, config_table

if TYPE_CHECKING:
    from workbench.recipes.serving import ServingRecipe

__all__ = [
    "LINT_KIND",
    "CheckpointFinding",
    "Finding",
    "FindingKind",
    "LintInput",
    "LintInputError",
    "LintReport",
    "LintRequest",
    "LintResult",
    "UpgradeReport",
    "check_recipe",
    "checkpoint_release",
    "findings_text",
    "lint_checkpoint",
    "lint_parsed",
    "lint_recipe",
    "lint_source",
    "lint_upgrade",
    "read_input",
    "run_lint",
    "verdicts",
    "write_fix",
]

# The lint's result document. Version 1: release, findings, upgrade changes, checkpoint findings, fix diff.
LINT_KIND = DocumentKind("lint", 1)


@dataclass(frozen=True)
class LintRequest:
    """What to lint, at which release, and what else to produce. Checked once, here."""

    source: str | Path | None = None  # a recipe, a script, '-' (standard input) or the command's text
    release: str | None = None  # a vllm-ascend release; None: installed, else the stack's, else main
    to: str | None = None  # also lint at this release and list what changes
    fix: Path | None = None  # write a migrated copy here (never in place)
    stack: Mapping[str, Any] | None = None  # a stack fingerprint naming the release
    stack_source: str = "the stack file"
    model_type: str | None = None  # the served model's type or architecture when the command cannot say
    checkpoint: Path | None = None  # lint a quantized checkpoint instead of a command
    readers: tuple[Reader, ...] = ()  # deployment-file readers tried first on a file (the verb hands deploy's in)

    def __post_init__(self) -> None:
        if (self.source is None) == (self.checkpoint is None):
            raise WorkbenchError(
                "give a serving recipe, a script, '-' for standard input or the command in quotes, "
                "or --checkpoint PATH (one of them, not both)"
            )
        if self.checkpoint is not None and (self.to or self.fix):
            raise WorkbenchError("--to and --fix apply to a command or recipe, not to --checkpoint")
        for flag, release in (("--release", self.release), ("--to", self.to)):
            if release is not None:
                _check_release(flag, release)
        if self.fix is not None and self.source is not None and Path(str(self.source)).expanduser() == self.fix:
            raise WorkbenchError(f"--fix {self.fix}: write the migrated copy to another file, never in place")


def _check_release(flag: str, release: str) -> None:
    try:
        config_table().tag_for(release)
    except ValueError as exc:
        raise WorkbenchError(f"{flag} {release!r}: {exc}") from None


@dataclass(frozen=True)
class LintResult:
    request: LintRequest
    report: LintReport | None  # None for --checkpoint
    upgrade: UpgradeReport | None = None
    fix_diff: str | None = None  # the migrated copy's diff ('' when nothing changed); None: no --fix
    checkpoint: tuple[CheckpointFinding, ...] = ()
    checkpoint_release: str | None = None
    checkpoint_basis: str | None = None

    @property
    def exit_code(self) -> int:
        """0: no error; 1: at least one setting (or checkpoint tensor) fails or does nothing on the release."""
        if self.report is None:
            return 1 if any(f.severity == "error" for f in self.checkpoint) else 0
        return self.report.exit_code

    def to_dict(self) -> dict[str, Any]:
        if self.report is None:
            return {
                "checkpoint": str(self.request.checkpoint),
                "release": self.checkpoint_release,
                "release_basis": self.checkpoint_basis,
                "findings": [f.to_dict() for f in self.checkpoint],
            }
        data: dict[str, Any] = {
            "input": self.report.parsed.where,
            "release": self.report.target.release,
            "release_basis": self.report.target.basis,
            "vllm": self.report.target.vllm_label,
            "model": self.report.model,
            "findings": self.report.records(),
        }
        if self.upgrade is not None:
            data["upgrade"] = {
                "to": self.upgrade.after.target.release,
                "findings": self.upgrade.after.records(),
                "changes": self.upgrade.changes(),
            }
        if self.fix_diff is not None:
            data["fix"] = {"out": str(self.request.fix), "diff": self.fix_diff}
        return data

    def write(self, path: str | Path) -> Path:
        from workbench.stack.provenance import provenance

        return write_result(Path(path), self.to_dict(), provenance(), LINT_KIND)

    def text(self, show_all: bool = False) -> str:
        if self.report is None:
            assert self.request.checkpoint is not None
            findings = list(self.checkpoint)
            return checkpoint_text(self.request.checkpoint, findings, self.checkpoint_release, self.checkpoint_basis)
        fix = None if self.fix_diff is None or self.request.fix is None else (self.request.fix, self.fix_diff)
        return report_text(self.report, self.upgrade, fix, show_all)


def run_lint(request: LintRequest, stdin: TextIO | None = None) -> LintResult:
    """Lint a command, script or recipe (and its upgrade and migrated copy), or a quantized checkpoint."""
    if request.checkpoint is not None:
        release, basis = checkpoint_release(request.release, request.stack, request.stack_source)
        findings = tuple(lint_checkpoint(request.checkpoint, release, basis))
        return LintResult(request, None, checkpoint=findings, checkpoint_release=release, checkpoint_basis=basis)
    read = read_input(request.source, stdin=stdin, readers=request.readers)
    report = _lint(read, request.release, request)
    upgrade = UpgradeReport(report, _lint(read, request.to, request)) if request.to else None
    fix_diff = None
    if request.fix is not None:
        fix_diff = write_fix(upgrade.after if upgrade is not None else report, request.fix)
    return LintResult(request, report, upgrade, fix_diff)


def _lint(read: LintInput, release: str | None, request: LintRequest) -> LintReport:
    return lint_parsed(
        read.parsed,
        release=release,
        stack=request.stack,
        stack_source=request.stack_source,
        recipe=read.recipe,
        source=read.path,
        model_type=request.model_type,
    )


# -- the library calls the use case is made of -------------------------------------------------------------


def _target_for(
    table: ConfigTable, recipe: Any, release: str | None, stack: Mapping[str, Any] | None, stack_source: str
) -> Target:
    if recipe is not None and release is None and recipe.device.value == "cpu":
        # A CPU recipe runs on this machine's vLLM; no vllm-ascend reads it, so its names are judged at main.
        vllm, vllm_basis = vllm_for_tag(table, MAIN, installed_here=True)
        basis = f"recipe {recipe.name} runs on the CPU: vllm-ascend names judged at main"
        return Target(MAIN, MAIN, basis, vllm, vllm_basis)
    return resolve_target(table, release, stack, stack_source)


def lint_parsed(
    parsed: ParsedInput,
    *,
    release: str | None = None,
    stack: Mapping[str, Any] | None = None,
    stack_source: str = "the stack file",
    recipe: Any = None,
    source: Path | None = None,
    model_type: str | None = None,
) -> LintReport:
    table = config_table()
    target = _target_for(table, recipe, release, stack, stack_source)
    model = identify(served_model(parsed), parsed.value_of("flag.--served-model-name"), model_type)
    return LintReport(parsed, target, tuple(judge(parsed, table, target, model)), source, model.basis)


def lint_source(
    source: str | Path,
    *,
    release: str | None = None,
    stack: Mapping[str, Any] | None = None,
    stack_source: str = "the stack file",
    model_type: str | None = None,
    readers: tuple[Reader, ...] = (),
) -> LintReport:
    read = read_input(source, readers=readers)
    return lint_parsed(
        read.parsed,
        release=release,
        stack=stack,
        stack_source=stack_source,
        recipe=read.recipe,
        source=read.path,
        model_type=model_type,
    )


def lint_upgrade(
    source: str | Path, release: str | None, to: str, readers: tuple[Reader, ...] = (), **kwargs: Any
) -> UpgradeReport:
    read = read_input(source, readers=readers)
    before = lint_parsed(read.parsed, release=release, recipe=read.recipe, source=read.path, **kwargs)
    after = lint_parsed(read.parsed, release=to, recipe=read.recipe, source=read.path, **kwargs)
    return UpgradeReport(before, after)


def lint_recipe(recipe: ServingRecipe, release: str | None = None) -> LintReport:
    text = recipe.source.read_text(encoding="utf-8") if recipe.source and recipe.source.is_file() else ""
    parsed = recipe_settings(recipe, text, str(recipe.source or recipe.name))
    return lint_parsed(parsed, release=release, recipe=recipe, source=recipe.source)


def check_recipe(recipe: ServingRecipe, *, release: str | None = None, out: Any = None) -> LintReport:
    """Lint a recipe before a server starts: warnings are printed, errors stop with one message."""
    report = lint_recipe(recipe, release)
    stream = out or sys.stderr
    for finding in report.warnings:
        print(f"lint: {recipe.name}: {finding.setting}: {finding.finding.value}: {finding.reason}", file=stream)
    if report.errors:
        lines = "; ".join(f"{f.setting} ({f.finding.value}: {f.reason}; fix: {f.fix})" for f in report.errors)
        raise WorkbenchError(
            f"recipe {recipe.name}: {len(report.errors)} setting(s) would fail or do nothing at vllm-ascend "
            f"{report.target.release}: {lines}. Fix the recipe (`ascend-workbench lint {recipe.source or recipe.name}` "
            "shows all findings), or pass --no-lint to start anyway"
        )
    return report


def write_fix(report: LintReport, out: str | Path) -> str:
    return fix_mod.write_fix(report.parsed, list(report.findings), Path(out), report.source)


def checkpoint_release(
    release: str | None, stack: Mapping[str, Any] | None = None, stack_source: str = "the stack file"
) -> tuple[str | None, str | None]:
    """(release, basis) for `lint --checkpoint`: --release, else the release this machine or the stack runs
    (`resolve_target`, as for a command); with neither, (None, None): the checkpoint is judged at every tag."""
    if release is None and stack is None and not (installed("vllm-ascend") or installed("vllm_ascend")):
        return None, None
    target = resolve_target(config_table(), release, stack, stack_source)
    return target.release, target.basis
