"""Serving recipes (`recipes/serving/*.yaml`): one vLLM OpenAI-compatible server each.

A recipe says which model, dtype, context length, engine arguments and environment variables a server
runs with; `workbench.serving.server` turns it into a command line, the recipe itself never launches
anything. It is read through the one recipe reader (`workbench.recipes.reader`), so a typo fails with
the file, the key and the closest valid key:

    recipes/serving/cpu-tiny.yaml: engine.max_num_seq: unknown key; did you mean 'max_num_seqs'?
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
import warnings
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from ascend_backend.kv_cache.sizing import utilization_warning
from ascend_backend.platform.kinds import DeviceKind
from workbench.recipes.cluster import ClusterSpec, cluster_dir
from workbench.recipes.reader import Frozen, load_recipe_file, resolve_recipe_path, validate_recipe
from workbench.settings import recipes_dir

EMBEDDED_PREFIX = "embedded:"


class DType(str, enum.Enum):
    AUTO = "auto"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FLOAT32 = "float32"


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


# A byte count written as 1073741824, '512MiB' or '2GiB'; the parsing travels with the type, so sweep
# axes derived from EngineArgs parse the same way.
ByteCount = Annotated[int, BeforeValidator(parse_bytes), Field(ge=1)]


class EngineArgs(Frozen):
    """vLLM engine arguments a porting session actually tunes; anything else goes in `extra_args`.

    None means "leave vLLM's default": the launcher passes only what the recipe sets, so a recipe
    reads as the list of decisions someone made.
    """

    max_num_seqs: int | None = Field(None, ge=1)
    block_size: int | None = Field(None, ge=1)
    gpu_memory_utilization: float | None = Field(None, gt=0.0, le=1.0)
    kv_cache_memory_bytes: ByteCount | None = None
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool | None = None
    max_num_batched_tokens: int | None = Field(None, ge=1)
    enforce_eager: bool | None = None
    quantization: str | None = None
    tensor_parallel_size: int = Field(1, ge=1)
    pipeline_parallel_size: int = Field(1, ge=1)
    data_parallel_size: int = Field(1, ge=1)
    distributed_executor_backend: Literal["mp", "ray", "uni"] | None = None
    # vLLM's JSON-valued arguments: vllm-ascend's own switches, and graph mode (cudagraph_mode, ...).
    # `ascend-workbench lint` says what each key does on the vllm-ascend release that will read it.
    additional_config: dict[str, Any] | None = None
    compilation_config: dict[str, Any] | None = None
    extra_args: tuple[str, ...] = ()

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
            if isinstance(value, dict):
                args += [flag, json.dumps(value, separators=(",", ":"))]
            elif isinstance(value, bool):
                # enforce_eager has no --no- form in vLLM; False is its default.
                if value or name != "enforce_eager":
                    args.append(flag if value else "--no-" + flag[2:])
            else:
                args += [flag, str(value)]
        return tuple(args) + self.extra_args


class EngineDump(Frozen):
    """`dump:` — record the engine's module outputs for its first forward steps (docs/METHOD.md §8).

    The launcher turns it into ASCEND_BACKEND_DUMP for the vLLM plugin (`ascend_backend.vllm_plugin.dump`),
    which records on any platform; `compare-dumps` then holds the dump against a float32 reference.

        dump:
          dir: runs/dumps/engine        # a new directory; relative to where the server is launched
          steps: 4                      # forward steps: the prompt's prefill, then one per decoded token
          modules: ["model.layers.*", "logits_processor"]   # fnmatch on vLLM's module names
          layers: [0, 1]                # decoder layers to keep (default: all)
          stats_only: false             # true: Max/Min/Mean/Norm only (big models)
    """

    dir: Path
    steps: int = Field(1, ge=1)
    modules: tuple[str, ...] = Field(("*",), min_length=1)
    layers: tuple[Annotated[int, Field(ge=0)], ...] | None = None
    stats_only: bool = False

    def env_value(self) -> str:
        """The ASCEND_BACKEND_DUMP value (the directory made absolute, so the engine finds it from any cwd)."""
        from ascend_backend.dump_format import DumpMode
        from ascend_backend.vllm_plugin.dump import DumpRequest

        request = DumpRequest(
            self.dir.expanduser().resolve(),
            self.steps,
            self.modules,
            frozenset(self.layers) if self.layers is not None else None,
            DumpMode.STATS if self.stats_only else DumpMode.TENSORS,
        )
        return request.to_env()


class ServingRecipe(Frozen):
    """One vLLM OpenAI-compatible server: model, precision, context, engine args, environment.

    `model` is `embedded:<name>` (a model the workbench prepares, see `workbench.embedded_models`),
    a local Hugging Face directory (relative paths are relative to the recipe file) or a hub id.
    """

    name: str
    description: str = ""
    device: DeviceKind = DeviceKind.CPU
    model: str
    served_model_name: str | None = None
    dtype: DType = DType.AUTO
    max_model_len: int | None = Field(None, ge=16)
    startup_timeout_s: float = Field(300.0, gt=0)
    engine: EngineArgs = EngineArgs()
    env: dict[str, str] = {}
    dump: EngineDump | None = None
    cluster: ClusterSpec | None = None  # several nodes on this machine (recipes/cluster/, docs/METHOD.md §20)
    source: Path | None = Field(None, exclude=True)

    @model_validator(mode="after")
    def _dump_needs_eager(self) -> ServingRecipe:
        if self.dump is not None and self.engine.enforce_eager is not True:
            raise ValueError(
                "dump: recording module outputs needs an eager engine (captured graphs skip the hooks); "
                "set engine.enforce_eager: true"
            )
        return self

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

    def model_is_local(self) -> bool:
        """Whether the model is a directory on this machine (embedded, or a local path), not a hub id."""
        return self.embedded_model is not None or self.local_model_path() is not None

    def local_model_path(self) -> Path | None:
        """The model as a local path when it looks like one (relative to the recipe file), else None."""
        if self.embedded_model is not None:
            return None
        path = Path(self.model).expanduser()
        if not path.is_absolute() and self.source is not None and (self.source.parent / path).exists():
            return (self.source.parent / path).resolve()
        looks_local = path.is_absolute() or self.model.startswith((".", "~")) or path.exists()
        return path if looks_local else None

    def server_args(self) -> tuple[str, ...]:
        """The server's flags this recipe decides (everything but --model, --host and --port)."""
        args: list[str] = []
        if self.served_model_name:
            args += ["--served-model-name", self.served_model_name]
        args += ["--dtype", self.dtype.value]
        if self.max_model_len:
            args += ["--max-model-len", str(self.max_model_len)]
        return (*args, *self.engine.cli_args())

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
        return validate_recipe(ServingRecipe, data, self.source or f"<recipe {self.name}>")


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


def resolve_serving_path(name_or_path: str | Path) -> Path:
    """A recipe file from a path, or from a shipped name such as 'cpu-tiny' (or a cluster recipe's, 'cpu-tiny-dp2')."""
    shipped_cluster = cluster_dir() / f"{name_or_path}.yaml"
    if not Path(name_or_path).expanduser().is_file() and shipped_cluster.is_file():
        return shipped_cluster
    return resolve_recipe_path(serving_dir(), name_or_path, "serving recipe")


class RecipeWarning(UserWarning):
    """A recipe or sweep setting that starts but works against docs/METHOD.md (shown, never fatal)."""


def recipe_warnings(recipe: ServingRecipe) -> tuple[str, ...]:
    """What the method warns about in this recipe, in words that name the field.

    Today: `engine.gpu_memory_utilization` above the NPU ceiling (docs/METHOD.md §11), as stated by
    `ascend_backend.kv_cache.sizing.utilization_warning` (the one statement of that rule; importing it
    loads no torch, which every `sweep`, `serve` and `bench` would otherwise pay before its first server).
    """
    found = []
    utilization = recipe.engine.gpu_memory_utilization
    if utilization is not None:
        problem = utilization_warning(recipe.device, utilization)
        if problem is not None:
            found.append(f"engine.gpu_memory_utilization: {problem} (docs/METHOD.md §11)")
    return tuple(found)


def warn_about_recipe(recipe: ServingRecipe, where: str | Path) -> tuple[str, ...]:
    """Emit each of `recipe_warnings` as a RecipeWarning prefixed with `where` (file or sweep point); return them."""
    messages = tuple(f"{where}: {message}" for message in recipe_warnings(recipe))
    for message in messages:
        warnings.warn(message, RecipeWarning, stacklevel=3)
    return messages


def load_serving_recipe(name_or_path: str | Path) -> ServingRecipe:
    """Read and validate a serving recipe file; any problem is one WorkbenchError naming file and key.

    Settings that start but go against the method (e.g. gpu_memory_utilization above 0.95 on an NPU)
    are emitted as `RecipeWarning`s.
    """
    path = resolve_serving_path(name_or_path)
    recipe = load_recipe_file(
        ServingRecipe, path, what="serving recipe", required="'name' and 'model'", name_from_file=True
    )
    warn_about_recipe(recipe, path)
    return recipe
