"""The one place lint reads its input: a serving recipe, a shell script, '-' for standard input, the text of a
command, or the name of a shipped recipe (docs/METHOD.md §2).

`read_input` reads once and returns everything the lint needs (the parsed settings, the file, the recipe,
the text), so a second view of the same input (`--to`, `--fix`) never reads standard input again.
Deployment files (Kubernetes, compose, Helm output, Dockerfile, `vllm serve --config` YAML) are read by the
`import` verb's readers, handed in as `readers` (lint imports no domain above it).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from workbench.lint.command import LintInputError, ParsedInput, parse_argv, parse_text

if TYPE_CHECKING:
    from workbench.recipes.serving import ServingRecipe

# (the file, its text) -> its settings, or None when the file is not of the reader's kind
Reader = Callable[[Path, str], ParsedInput | None]


@dataclass(frozen=True)
class LintInput:
    """One read of the lint's input."""

    parsed: ParsedInput
    path: Path | None  # the file read (None: standard input, a command text)
    recipe: Any  # the serving recipe when the input is one (ServingRecipe), else None
    where: str  # how findings name the input: the path, 'stdin', 'command'


def read_input(
    source: str | Path, where: str | None = None, stdin: TextIO | None = None, readers: tuple[Reader, ...] = ()
) -> LintInput:
    """Read `source` once: a file path (a serving recipe YAML or a shell script), '-' for standard input (or
    `stdin`), the text of a command itself (anything with a newline or a space that is not an existing path),
    or the name of a shipped serving recipe. `readers`: callables (path, text) -> ParsedInput | None tried
    first on a file, so deployment files (manifests, compose, `--config` YAML, Dockerfiles) are read by
    `import`'s readers; the verb hands `workbench.deploy.api.lint_reader` in (lint imports no domain above it)."""
    text, path, where = _read_text(source, where, stdin)
    for reader in readers if path is not None else ():
        deployment = reader(path, text)
        if deployment is not None:
            return LintInput(deployment, path, None, where)
    recipe = _as_recipe(text, path)
    if recipe is not None:
        parsed = recipe_settings(recipe, text, where)
    else:
        parsed = parse_text(text, where)
    return LintInput(parsed, path, recipe, where)


def _read_text(source: str | Path, where: str | None, stdin: TextIO | None) -> tuple[str, Path | None, str]:
    path = _as_path(source)
    if path is not None:
        try:
            return path.read_text(encoding="utf-8"), path, where or str(path)
        except OSError as exc:
            raise LintInputError(f"{path}: cannot read it ({exc.strerror}); check the path") from None
        except UnicodeDecodeError:
            raise LintInputError(f"{path}: not a text file; lint reads shell scripts, commands and recipes") from None
    if source == "-":
        return (stdin or sys.stdin).read(), None, where or "stdin"
    if isinstance(source, str) and (" " in source.strip() or "\n" in source):
        return source, None, where or "command"
    shipped = _shipped_recipe(str(source))
    if shipped is None:
        raise LintInputError(
            f"{source}: no such file or shipped recipe; give a serving recipe, a shell script, '-' for "
            "standard input, or the command itself in quotes"
        )
    return shipped.read_text(encoding="utf-8"), shipped, where or str(shipped)


def _as_path(source: str | Path) -> Path | None:
    """The file `source` names ('recipes/examples/x.sh' also from any working directory), or None."""
    if isinstance(source, Path):
        return source.expanduser()
    if source == "-" or "\n" in source:
        return None
    if Path(source).expanduser().is_file():
        return Path(source).expanduser()
    from workbench.settings import recipes_dir

    in_checkout = recipes_dir().parent / source
    return in_checkout if in_checkout.is_file() else None


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
