"""The one reader for every recipe file: YAML -> a frozen, validated model, or one clear error.

Every kind of recipe (serving recipes, sweep specs, feature plans, version matrices, op suites, and any
kind added later) is a pydantic model that subclasses `Frozen` — immutable once loaded, so a recipe
cannot drift while a run uses it, and strict about keys, so a typo such as `max_num_seq` fails loudly
instead of leaving vLLM on its default — and is read with `load_recipe_file`. A problem becomes one
`WorkbenchError` naming the file, the dotted key as the user wrote it, and the closest valid key or
value:

    recipes/serving/cpu-tiny.yaml: engine.max_num_seq: unknown key; did you mean 'max_num_seqs'?
    recipes/sweeps/x.yaml: points[1].block_size: Input should be greater than or equal to 1 (got 0)
"""

from __future__ import annotations

import difflib
import enum
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from workbench.errors import WorkbenchError


class Frozen(BaseModel):
    """Base of every recipe model: immutable, and unknown keys are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")


RecipeT = TypeVar("RecipeT", bound=BaseModel)


def resolve_recipe_path(directory: Path, name_or_path: str | Path, what: str) -> Path:
    """A recipe file from a path, or from a name shipped in `directory` (e.g. 'cpu-tiny').

    `what` names the kind in the error ("serving recipe", "sweep spec"), which also lists the shipped ones.
    """
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path
    shipped = directory / f"{path.stem if path.suffix in ('.yaml', '.yml') else name_or_path}.yaml"
    if shipped.is_file():
        return shipped
    known = sorted(p.stem for p in directory.glob("*.yaml"))
    close = difflib.get_close_matches(path.stem, known, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    raise WorkbenchError(f"{what} {str(name_or_path)!r} not found (shipped: {', '.join(known) or 'none'}){hint}")


def read_yaml_mapping(path: Path, what: str, required: str = "") -> dict[str, Any]:
    """The YAML mapping in `path`; one clear error for a missing, unreadable or malformed file."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise WorkbenchError(
            f"{path}: cannot read the {what} ({exc.strerror}); check the path and permissions"
        ) from None
    except yaml.YAMLError as exc:
        raise WorkbenchError(f"{path}: not valid YAML ({exc}); fix the syntax at the line shown") from None
    except UnicodeDecodeError:
        raise WorkbenchError(f"{path}: not a text file; a {what} is YAML") from None
    if not isinstance(data, dict):
        needs = f" with at least {required}" if required else ""
        raise WorkbenchError(f"{path}: a {what} is a YAML mapping{needs}")
    return data


def validate_recipe(model: type[RecipeT], data: dict[str, Any], where: Path | str) -> RecipeT:
    """`data` validated into `model`; a `source: Path | None` field, when the model has one, is set to `where`.

    (A `source` of another type, such as a matrix's citation, is the file's own data and left alone.)
    """
    source = model.model_fields.get("source")
    if source is not None and Path in _members(source.annotation) and isinstance(where, Path):
        data = {**data, "source": where.resolve()}
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise WorkbenchError(f"{where}: " + "; ".join(describe_error(model, err) for err in exc.errors())) from None


def load_recipe_file(
    model: type[RecipeT], path: Path | str, *, what: str, required: str = "", name_from_file: bool = False
) -> RecipeT:
    """Read `path` and validate it into `model`; any problem is one WorkbenchError naming file and key.

    `name_from_file`: a recipe without a `name` key is named after its file (serving recipes, sweeps).
    """
    path = Path(path)
    data = read_yaml_mapping(path, what, required)
    if name_from_file:
        data.setdefault("name", path.stem)
    return validate_recipe(model, data, path)


# -- error messages --------------------------------------------------------------------------------


def _members(annotation: Any) -> list[Any]:
    """The alternatives of an annotation: `X | None` -> [X, NoneType]; Annotated[X, ...] -> [X]."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _members(arg)]
    return [annotation]


def _model_in(annotation: Any, key: str) -> type[BaseModel] | None:
    for member in _members(annotation):
        if isinstance(member, type) and issubclass(member, BaseModel) and key in member.model_fields:
            return member
    return None


def _container_item(annotation: Any, key: Any) -> Any:
    """The annotation of `annotation[key]` when it is a list/tuple (int key) or dict (str key), else None."""
    for member in _members(annotation):
        origin, args = typing.get_origin(member), typing.get_args(member)
        if isinstance(key, int) and origin in (list, tuple, set, frozenset) and args:
            return args[0]
        if origin is dict and len(args) == 2:
            return args[1]
    return None


def _walk(root: type[BaseModel], loc: tuple[Any, ...], unknown_key: bool) -> tuple[list[Any], type[BaseModel], Any]:
    """The location as the user wrote it, the model that owns its last key, and that key's annotation.

    pydantic adds the branches it tried to an error's location (('grid', 'quantization', 0, 'str'));
    those are dropped so the message names only what is in the file.
    """
    readable: list[Any] = []
    owner: type[BaseModel] = root
    annotation: Any = root
    for index, part in enumerate(loc):
        last = index == len(loc) - 1
        model = _model_in(annotation, part) if isinstance(part, str) else None
        if model is not None:
            owner, annotation = model, model.model_fields[part].annotation
            readable.append(part)
        elif (item := _container_item(annotation, part)) is not None:
            annotation = item
            readable.append(part)
        elif last and unknown_key:
            models = [m for m in _members(annotation) if isinstance(m, type) and issubclass(m, BaseModel)]
            owner = models[0] if models else owner
            readable.append(part)
    return readable, owner, annotation


def _allowed_values(annotation: Any) -> list[str]:
    """Enum values or Literal strings a field accepts (for "did you mean" on a wrong value)."""
    values: list[str] = []
    for member in _members(annotation):
        if isinstance(member, type) and issubclass(member, enum.Enum):
            values += [str(m.value) for m in member]
        elif typing.get_origin(member) is typing.Literal:
            values += [a for a in typing.get_args(member) if isinstance(a, str)]
    return values


def _dotted(loc: list[Any]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def describe_error(model: type[BaseModel], err: Any) -> str:
    """One pydantic error as 'dotted.key: problem (got value)', with 'did you mean' where it can."""
    unknown = err["type"] == "extra_forbidden"
    loc, owner, annotation = _walk(model, tuple(err["loc"]), unknown)
    dotted = _dotted(loc)
    if unknown:
        valid = [k for k in owner.model_fields if k != "source"]
        close = difflib.get_close_matches(str(loc[-1]) if loc else "", valid, n=1, cutoff=0.5)
        hint = f"did you mean '{close[0]}'?" if close else f"valid keys: {', '.join(valid)}"
        return f"{dotted}: unknown key; {hint}"
    if err["type"] == "missing":
        return f"{dotted}: required key is missing"
    message = str(err["msg"]).removeprefix("Value error, ")
    value = err.get("input")
    text = f"{dotted}: {message}" if isinstance(value, (dict, list)) else f"{dotted}: {message} (got {value!r})"
    allowed = _allowed_values(annotation)
    if allowed and not isinstance(value, (dict, list)):
        close = difflib.get_close_matches(str(value), allowed, n=1, cutoff=0.3)
        text += f"; did you mean '{close[0]}'?" if close else f"; valid values: {', '.join(allowed)}"
    return text
