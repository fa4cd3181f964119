"""The lint API: what `ascend-workbench lint`, the recipe verbs and notebook 02 call (docs/METHOD.md §2, §16).

report = lint_source("serve.sh", release="v0.11.0")     # a script, a pasted command or a recipe
report.table()                                          # one row per setting
upgrade = lint_upgrade("serve.sh", "v0.11.0", "v0.13.0") # what changes when the release changes
diff = write_fix(report, "serve.fixed.sh")               # a migrated copy and its diff
check_recipe(recipe)                                     # serve / bench / sweep / bisect: errors stop here
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ascend_backend.npu.config_table import MAIN, ConfigTable, config_table
from ascend_backend.npu.kinds import DeviceKind
from workbench.errors import WorkbenchError
from workbench.lint import fix as fix_mod
from workbench.lint.checkpoint import CheckpointFinding, findings_text, lint_checkpoint, verdicts
from workbench.lint.command import LintInputError, ParsedInput, parse_argv, parse_text
from workbench.lint.findings import Finding, FindingKind
from workbench.lint.judge import Target, judge
from workbench.lint.release import resolve_target, vllm_for_tag
from workbench.results.verdict import Verdict

if TYPE_CHECKING:
    import pandas as pd

    from workbench.recipes.serving import ServingRecipe

__all__ = [
    "CheckpointFinding",
    "Finding",
    "FindingKind",
    "LintInputError",
    "LintReport",
    "UpgradeReport",
    "check_recipe",
    "checkpoint_release",
    "findings_text",
    "lint_checkpoint",
    "lint_parsed",
    "lint_recipe",
    "lint_source",
    "lint_upgrade",
    "read_source",
    "verdicts",
    "write_fix",
]

COLUMNS = ["line", "setting", "value", "finding", "severity", "reason", "fix", "cite"]


@dataclass(frozen=True)
class LintReport:
    parsed: ParsedInput
    target: Target
    findings: tuple[Finding, ...]
    source: Path | None = None

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Verdict.ERROR]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Verdict.WARNING]

    @property
    def exit_code(self) -> int:
        return 1 if self.errors else 0

    def records(self) -> list[dict[str, Any]]:
        return [f.to_dict() for f in self.findings]

    def table(self) -> pd.DataFrame:
        import pandas as pd

        rows = [{**f.to_dict(), "value": _short(f.value)} for f in self.findings]
        return pd.DataFrame(rows, columns=[*COLUMNS, "release", "release_basis"])[COLUMNS]

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for finding in self.findings:
            counts[finding.finding.value] = counts.get(finding.finding.value, 0) + 1
        return counts

    def headline(self) -> str:
        where = self.parsed.where
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(self.counts().items()) if k not in {"ok", "foreign"})
        return (
            f"{where}: {len(self.findings)} setting(s) at vllm-ascend {self.target.release} "
            f"({self.target.basis}; vLLM {self.target.vllm_label}: {self.target.vllm_basis}): "
            f"{len(self.errors)} error(s), {len(self.warnings)} warning(s)" + (f" [{kinds}]" if kinds else "")
        )


@dataclass(frozen=True)
class UpgradeReport:
    before: LintReport
    after: LintReport

    def changes(self) -> list[dict[str, Any]]:
        """One row per setting of the input whose finding changes between the two releases."""
        rows, seen = [], set()
        for occ in self.before.parsed.occurrences:
            a, b = _covering(self.before, occ), _covering(self.after, occ)
            key = (occ.line, a.setting if a else None, b.setting if b else None)
            if key in seen or (a is None and b is None):
                continue
            seen.add(key)
            if a is not None and b is not None and a.finding is b.finding and a.severity is b.severity:
                if _gist(a.reason) == _gist(b.reason) or a.finding not in _MEANINGFUL:
                    continue
            setting = (b or a).setting
            rows.append(
                {
                    "line": occ.line,
                    "setting": setting,
                    "value": _short((b or a).value),
                    f"at {self.before.target.release}": a.finding.value if a else "-",
                    f"at {self.after.target.release}": b.finding.value if b else "-",
                    "what changes": b.reason if b is not None else "no finding",
                    "fix": b.fix if b is not None else "",
                }
            )
        return rows

    def table(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.changes())


# Same class at both releases: only these can still change what the setting does (a new meaning, a
# different rewrite); a dead setting that stays dead is not news.
_MEANINGFUL = {FindingKind.OK, FindingKind.REWRITTEN, FindingKind.DEPRECATED, FindingKind.RENAMED}


def _gist(reason: str) -> str:
    """A reason without release and vLLM version numbers, so two releases' texts compare on substance."""
    return re.sub(r"\bv?\d+\.\d+[\w.]*|\bmain\b", "", reason)


def _covering(report: LintReport, occ: Any) -> Finding | None:
    """The finding that speaks for an occurrence: its own, or its unknown section's."""
    for finding in report.findings:
        if finding.line == occ.line and (
            finding.setting == occ.setting or occ.setting.startswith(finding.setting + ".")
        ):
            return finding
    return None


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else "" if value is None else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- inputs ------------------------------------------------------------------------------------------------


def read_source(
    source: str | Path, where: str | None = None, readers: tuple[Any, ...] = ()
) -> tuple[ParsedInput, Path | None, Any]:
    """(parsed settings, the file or None, the serving recipe when the input is one).

    `source` is a file path (a serving recipe YAML or a shell script), '-' for standard input, or the
    text of a command itself (anything with a newline or a space that is not an existing path).
    `readers`: callables (path, text) -> ParsedInput | None tried first on a file, so deployment files
    (manifests, compose, `--config` YAML, Dockerfiles) are read by `import`'s readers; the verb hands
    `workbench.deploy.api.lint_reader` in (lint imports no domain above it).
    """
    path = None
    if isinstance(source, str) and source != "-" and "\n" not in source and not Path(source).expanduser().exists():
        from workbench.settings import recipes_dir

        in_checkout = recipes_dir().parent / source  # 'recipes/examples/x.sh' from any working directory
        if in_checkout.is_file():
            source = in_checkout
    if isinstance(source, Path) or (
        isinstance(source, str) and source != "-" and "\n" not in source and Path(source).expanduser().is_file()
    ):
        path = Path(source).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise LintInputError(f"{path}: cannot read it ({exc.strerror}); check the path") from None
        except UnicodeDecodeError:
            raise LintInputError(f"{path}: not a text file; lint reads shell scripts, commands and recipes") from None
        where = where or str(path)
    elif source == "-":
        text, where = sys.stdin.read(), where or "stdin"
    elif isinstance(source, str) and (" " in source.strip() or "\n" in source):
        text, where = source, where or "command"
    else:
        shipped = _shipped_recipe(str(source))
        if shipped is None:
            raise LintInputError(
                f"{source}: no such file or shipped recipe; give a serving recipe, a shell script, '-' for "
                "standard input, or the command itself in quotes"
            )
        return read_source(shipped, where, readers)
    for reader in readers if path is not None else ():
        deployment = reader(path, text)
        if deployment is not None:
            return deployment, path, None
    recipe = _as_recipe(text, path)
    if recipe is not None:
        return recipe_settings(recipe, text, where), path, recipe
    return parse_text(text, where), path, None


def _shipped_recipe(name: str) -> Path | None:
    """recipes/serving/<name>.yaml when `name` is the name of a shipped serving recipe."""
    from workbench.settings import recipes_dir

    path = recipes_dir() / "serving" / f"{Path(name).stem}.yaml"
    return path if path.is_file() and "/" not in name else None


def _as_recipe(text: str, path: Path | None):
    """The serving recipe in `text`, or None when it is not YAML describing one."""
    if path is not None and path.suffix not in (".yaml", ".yml"):
        return None
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        if path is not None:
            raise LintInputError(f"{path}: not valid YAML; a serving recipe is YAML, a script is not .yaml") from None
        return None
    if not isinstance(data, dict) or "model" not in data:
        if path is not None:
            raise LintInputError(f"{path}: a YAML file lint reads is a serving recipe (it has no 'model:' key)")
        return None
    from workbench.recipes.reader import validate_recipe
    from workbench.recipes.serving import ServingRecipe

    return validate_recipe(ServingRecipe, data, path or "recipe")


def recipe_settings(recipe: ServingRecipe, text: str = "", where: str | None = None) -> ParsedInput:
    return parse_argv(recipe.server_args(), dict(recipe.env), where or recipe.name, text)


# -- linting ----------------------------------------------------------------------------------------------


def _target_for(
    table: ConfigTable, recipe: Any, release: str | None, stack: Mapping[str, Any] | None, stack_source: str
) -> Target:
    if recipe is not None and release is None and recipe.device is DeviceKind.CPU:
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
) -> LintReport:
    table = config_table()
    target = _target_for(table, recipe, release, stack, stack_source)
    return LintReport(parsed, target, tuple(judge(parsed, table, target)), source)


def lint_source(
    source: str | Path,
    *,
    release: str | None = None,
    stack: Mapping[str, Any] | None = None,
    stack_source: str = "the stack file",
    readers: tuple[Any, ...] = (),
) -> LintReport:
    parsed, path, recipe = read_source(source, readers=readers)
    return lint_parsed(parsed, release=release, stack=stack, stack_source=stack_source, recipe=recipe, source=path)


def lint_upgrade(
    source: str | Path, release: str | None, to: str, readers: tuple[Any, ...] = (), **kwargs: Any
) -> UpgradeReport:
    parsed, path, recipe = read_source(source, readers=readers)
    before = lint_parsed(parsed, release=release, recipe=recipe, source=path, **kwargs)
    after = lint_parsed(parsed, release=to, recipe=recipe, source=path, **kwargs)
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
    from workbench.lint.release import _installed

    if release is None and stack is None and not (_installed("vllm-ascend") or _installed("vllm_ascend")):
        return None, None
    target = resolve_target(config_table(), release, stack, stack_source)
    return target.release, target.basis
