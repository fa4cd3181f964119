"""The import API: what `ascend-workbench import` and notebook 00 call (docs/METHOD.md §1, §2).

    result = run_import(ImportRequest(paths=(Path("deploy/"),), to_ascend=Path("ported/")))
    print(result.text())          # containers, settings with file:line, the release and why, the ported diffs
    result.settings_table()       # one row per engine setting, traced to its file and line
    result.write("import.json")   # kind "import"

A port starts from the deployment as written: the engine containers are read from scripts, Dockerfiles,
compose files, manifests, `helm template` output, `vllm serve --config` files, `LLM(...)` calls and the
environment conventions a service declares; a release is picked from what the service runs; each container
becomes a serving recipe for the Ascend side; `to_ascend` writes the ported files with a diff each, read
back and linted at the picked release.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.deploy import convention as convention_mod
from workbench.deploy.lintview import parsed_for
from workbench.deploy.model import Container, Origin, ReadResult, Setting
from workbench.deploy.picker import Pick, check_release, pick_release
from workbench.deploy.port import PortedFile, check_out, plan_all, write_port
from workbench.deploy.read import read_paths
from workbench.deploy.recipe import RecipeOut, recipe_for, validate
from workbench.errors import WorkbenchError
from workbench.results.envelope import DocumentKind, write_result
from workbench.results.files import write_text

if TYPE_CHECKING:
    import pandas as pd

    from workbench.lint.command import ParsedInput

IMPORT_KIND = DocumentKind("import", 1)
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")

__all__ = ["IMPORT_KIND", "ImportRequest", "ImportResult", "check_release", "lint_reader", "request_for", "run_import"]


@dataclass(frozen=True)
class ImportRequest:
    """What to import. `release` None: picked from the service; `to_ascend`: where the ported files go."""

    paths: tuple[Path, ...]
    release: str | None = None
    to_ascend: Path | None = None
    values: tuple[Path, ...] = ()  # Helm values files, for charts rendered here
    env: tuple[str, ...] = ()  # NAME=VALUE: what the shell would give compose files and scripts
    convention: Path | None = None  # an environment-to-flag mapping file
    npu_resource: str | None = None  # e.g. huawei.com/ascend-1980 on Huawei Cloud CCE

    def __post_init__(self) -> None:
        if not self.paths:
            raise WorkbenchError(
                "PATH: give the deployment's files or directory (scripts, Dockerfiles, manifests, ...)"
            )
        for path in (*self.paths, *self.values, *((self.convention,) if self.convention else ())):
            if not Path(path).exists():
                raise WorkbenchError(f"{path}: no such file or directory; check the path")
        bad = [e for e in self.env if not _ENV.match(e)]
        if bad:
            raise WorkbenchError(f"--env {bad[0]!r}: write NAME=VALUE")
        if self.release is not None:
            check_release(self.release)
        if self.to_ascend is not None:
            check_out(self.to_ascend, self.paths)

    def environment(self) -> dict[str, Setting]:
        return {
            n: Setting(f"env.{n}", v, Origin("--env", 0, "command line"))
            for n, _, v in (e.partition("=") for e in self.env)
        }


@dataclass(frozen=True)
class ImportResult:
    read: ReadResult
    pick: Pick | None
    recipes: tuple[RecipeOut, ...]
    ported: tuple[PortedFile, ...]
    ported_lint: tuple[dict[str, Any], ...]  # per ported engine container: errors at the release
    seconds: float
    notes: tuple[str, ...] = field(default=())

    def settings_rows(self) -> list[dict[str, Any]]:
        rows = []
        for container in self.read.containers:
            for setting in container.settings():
                rows.append(
                    {
                        "container": container.name,
                        "setting": setting.key,
                        "value": setting.value,
                        "file": setting.origin.file,
                        "line": setting.origin.line,
                        "via": setting.origin.via,
                        "resolved from": "; ".join(map(str, setting.resolved_from)),
                    }
                )
        return rows

    def settings_table(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.settings_rows())

    def diffs(self) -> str:
        return "\n".join(p.diff for p in self.ported)

    def release_table(self) -> pd.DataFrame:
        """The release picked: one row per reason and per change that must be made, with its citation."""
        import pandas as pd

        pick = self.pick
        rows = [] if pick is None else [{"kind": "why", "text": r.text, "cite": r.cite} for r in pick.reasons]
        rows += [] if pick is None else [{"kind": "change", "text": c.text, "cite": c.cite} for c in pick.changes]
        return pd.DataFrame(rows, columns=["kind", "text", "cite"])

    def changes_table(self) -> pd.DataFrame:
        """Every change of the ported files: setting, before, after, why, the METHOD section and the citation."""
        import pandas as pd

        rows = [{"file": p.source, **c.to_dict()} for p in self.ported for c in p.changes]
        return pd.DataFrame(rows)

    def ported_lint_table(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame([{**r, "errors": len(r["errors"])} for r in self.ported_lint])

    def clean(self) -> bool:
        """Every ported engine container lints without an error at the picked release."""
        return all(not row["errors"] for row in self.ported_lint)

    def to_dict(self) -> dict[str, Any]:
        return {
            "containers": [_container_dict(c) for c in self.read.containers],
            "companions": [c.name for c in self.read.companions],
            "read": [{"path": p, "kind": k.value} for p, k in self.read.read],
            "not_read": [n.__dict__ for n in self.read.not_read],
            "convention": {"flags": len(self.read.convention.flags)},
            "pick": self.pick.to_dict() if self.pick else None,
            "recipes": [
                {"name": r.name, "container": r.container, "recipe": r.data, "trace": list(r.trace)}
                for r in self.recipes
            ],
            "ported": [p.to_dict() for p in self.ported],
            "ported_lint": list(self.ported_lint),
            "seconds": round(self.seconds, 3),
            "notes": list(self.notes),
        }

    def write(self, path: str | Path) -> Path:
        from workbench.stack.provenance import provenance

        return write_result(Path(path), self.to_dict(), provenance(), IMPORT_KIND)

    def text(self, diffs: bool = True) -> str:
        from workbench.deploy.report import render

        return render(self, diffs)


def _container_dict(container: Container) -> dict[str, Any]:
    return {
        "name": container.name,
        "source": container.source,
        "line": container.line,
        "kind": container.kind.value,
        "launcher": container.launcher,
        "settings": [{"setting": s.key, "value": s.value, "from": s.trace()} for s in container.settings()],
        "unresolved": list(container.unresolved),
        "notes": list(container.notes),
    }


def request_for(deployment: str | Path, ported_to: str | Path | None = None, **options: Any) -> ImportRequest:
    """The request a notebook makes: a relative path that does not exist from the working directory is
    tried from the repository root (notebooks run from notebooks/ or from the root), as the scan does."""
    from workbench import settings

    def resolve(path: str | Path) -> Path:
        candidate = Path(path).expanduser()
        return candidate if candidate.exists() or candidate.is_absolute() else settings.REPO_ROOT / candidate

    target = (
        None
        if ported_to is None
        else (Path(ported_to) if Path(ported_to).is_absolute() else settings.REPO_ROOT / ported_to)
    )
    return ImportRequest((resolve(deployment),), to_ascend=target, **options)


def run_import(request: ImportRequest) -> ImportResult:
    started = time.perf_counter()
    mapping = convention_mod.load_mapping(request.convention) if request.convention else None
    result = read_paths(tuple(Path(p) for p in request.paths), request.environment(), request.values, mapping)
    notes = _notes(result)
    if not result.containers:
        return ImportResult(result, None, (), (), (), time.perf_counter() - started, notes)
    pick = pick_release(result, request.release)
    changes = plan_all(result, pick.release, request.npu_resource)
    consumed = frozenset(result.convention.flags)
    recipes = []
    for container in result.containers:
        recipe = recipe_for(container, [c for c in changes if c.container == container.name], consumed)
        if recipe is None:
            notes += (f"{container.name}: no model is set, so no recipe (give it with --env or in the deployment)",)
            continue
        validate(recipe)
        recipes.append(recipe)
    ported: list[PortedFile] = []
    checked: tuple[dict[str, Any], ...] = ()
    if request.to_ascend is not None:
        ported = write_port(changes, request.to_ascend, request.paths)
        _write_recipes(recipes, request.to_ascend)
        checked = _lint_ported(request, result, pick.release)
    return ImportResult(result, pick, tuple(recipes), tuple(ported), checked, time.perf_counter() - started, notes)


def _notes(result: ReadResult) -> tuple[str, ...]:
    notes = []
    for container in result.containers:
        if container.unresolved:
            notes.append(
                f"{container.name}: nothing read sets {', '.join(container.unresolved)}; pass --env NAME=VALUE or a .env file"
            )
    return tuple(notes)


def _write_recipes(recipes: list[RecipeOut], out: Path) -> None:
    for recipe in recipes:
        write_text(out / "recipes" / f"{recipe.name}.yaml", recipe.yaml_text())


def _lint_ported(request: ImportRequest, original: ReadResult, release: str) -> tuple[dict[str, Any], ...]:
    """Read the ported tree (ported files over the originals) and lint each engine container at the release."""
    import shutil
    import tempfile

    from workbench.lint.api import lint_parsed

    assert request.to_ascend is not None
    with tempfile.TemporaryDirectory(prefix="ported-") as tmp:
        roots = []
        for index, path in enumerate(request.paths):
            base = Path(tmp) / str(index)
            if Path(path).is_dir():
                shutil.copytree(path, base, ignore=shutil.ignore_patterns(".git", "node_modules", ".venv"))
            else:
                base.mkdir(parents=True)
                shutil.copy2(path, base / Path(path).name)
            _overlay(request.to_ascend, base, Path(path))
            roots.append(base if Path(path).is_dir() else base / Path(path).name)
        again = read_paths(tuple(roots), request.environment(), request.values)
        consumed = frozenset(again.convention.flags)
        rows = []
        for container in again.containers:
            report = lint_parsed(parsed_for(container, consumed), release=release)
            errors = [f"{f.setting}: {f.reason}" for f in report.errors]
            rows.append(
                {"container": container.name, "release": release, "errors": errors, "warnings": len(report.warnings)}
            )
        return tuple(rows)


def _overlay(out: Path, base: Path, original: Path) -> None:
    """Copy the ported files (mirrored under `out`) over a copy of the input."""
    import shutil

    for ported in out.rglob("*"):
        relative = ported.relative_to(out)
        if ported.is_file() and relative.parts[0] != "recipes":
            target = base / relative if original.is_dir() else base / relative.name
            if target.exists():
                shutil.copy2(ported, target)


def lint_reader(path: Path, text: str) -> ParsedInput | None:
    """For `lint`'s input reading: a deployment file (manifest, compose file, `--config` YAML, Dockerfile,
    environment template) as the settings of its engine container, or None when it is not one. A file with
    several engine containers is read as its first; `import` reads them all."""
    if path.suffix not in (".yaml", ".yml", ".json") and not path.name.startswith(("Dockerfile", "Containerfile")):
        return None
    try:
        result = read_paths((path,), {})
    except WorkbenchError:
        return None
    if not result.containers:
        return None
    first = result.containers[0]
    parsed = parsed_for(first, frozenset(result.convention.flags))
    if len(result.containers) > 1:
        parsed.where = f"{path} [{first.name}; {len(result.containers) - 1} more engine container(s): `ascend-workbench import {path}` reads all]"
    return parsed
