"""The typed hand-offs of `import`: where a setting was written, the engine containers read, and the files
that could not be read (docs/METHOD.md §1).

A setting is always kept with its `Origin` (file, line, and how it got there: a flag on the command line, an
environment variable, a value resolved from a Dockerfile `ARG`, a flag an environment convention makes), so
every row of a recipe, a release reason or a ported line points back at the text the user wrote.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace


class SourceKind(str, enum.Enum):
    """What kind of deployment file a reader took a file for."""

    SHELL = "shell"  # a launch script: `vllm serve`, `python -m vllm...api_server`, `docker run`
    DOCKERFILE = "dockerfile"
    COMPOSE = "compose"
    KUBERNETES = "kubernetes"  # manifests, one or many documents
    HELM_RENDERED = "helm-rendered"  # `helm template` output (documents with `# Source:` comments)
    HELM_CHART = "helm-chart"  # a chart directory: rendered with `helm template` when helm is here
    VLLM_CONFIG = "vllm-config"  # `vllm serve --config FILE` YAML
    PYTHON = "python"  # `LLM(...)` / `AsyncEngineArgs(...)` calls, or a launcher that builds `vllm serve`
    ENV_TEMPLATE = "env-template"  # environment a platform hands the image (.env, serverless templates)
    CONVENTION = "convention"  # a module or mapping file that turns environment variables into flags


@dataclass(frozen=True)
class Origin:
    """Where a value was written: `file:line`, and how it reached the engine (`via`)."""

    file: str
    line: int
    via: str = ""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where} ({self.via})" if self.via else where


@dataclass(frozen=True)
class Setting:
    """One engine setting: `flag.--max-model-len`, `env.HF_HOME`, `model`, with its value and origin."""

    key: str
    value: str | None
    origin: Origin
    resolved_from: tuple[Origin, ...] = ()  # the assignments a `$VAR` in the value was resolved from

    @property
    def kind(self) -> str:
        return self.key.split(".", 1)[0]

    @property
    def name(self) -> str:
        return self.key.split(".", 1)[-1]

    def trace(self) -> str:
        return "; ".join(str(o) for o in (self.origin, *self.resolved_from))


@dataclass(frozen=True)
class Container:
    """One engine container (a process that runs vLLM's server) and what its deployment gives it."""

    name: str
    source: str  # the file that declares it
    line: int
    kind: SourceKind
    launcher: str  # 'vllm serve', 'api_server', 'LLM()', 'image entrypoint (vllm serve)', ...
    image: Setting | None = None
    flags: tuple[Setting, ...] = ()  # flag.--x and 'model', in command-line order
    env: tuple[Setting, ...] = ()
    resources: tuple[Setting, ...] = ()  # resource.<name>, e.g. resource.nvidia.com/gpu
    placement: tuple[Setting, ...] = ()  # runtimeClassName, shm size, gpus, devices, ipc, volumes
    unresolved: tuple[str, ...] = ()  # variables a value needs that nothing read sets
    notes: tuple[str, ...] = ()

    def settings(self) -> tuple[Setting, ...]:
        return (*((self.image,) if self.image else ()), *self.flags, *self.env, *self.resources, *self.placement)

    def flag(self, name: str) -> Setting | None:
        """The effective value of a flag (the last one written wins, as in argparse)."""
        found = [s for s in self.flags if s.key == f"flag.{name}" or (name == "model" and s.key == "model")]
        return found[-1] if found else None

    def model(self) -> str | None:
        setting = self.flag("model") or self.flag("--model")
        return setting.value if setting else None

    def with_env(self, extra: tuple[Setting, ...]) -> Container:
        return replace(self, env=(*self.env, *extra))


@dataclass(frozen=True)
class NotRead:
    """A file the import did not read as a deployment, and why (every such file is named)."""

    path: str
    reason: str


@dataclass(frozen=True)
class Convention:
    """Environment variable -> flag, as a service declares it (a module, a script, or a mapping file)."""

    flags: dict[str, str] = field(default_factory=dict)  # ENV_NAME -> --flag
    booleans: frozenset[str] = frozenset()  # flags that take no value: truthy -> --flag, falsy -> omitted
    negatable: frozenset[str] = frozenset()  # switches whose falsy value is written --no-flag
    removed: frozenset[str] = frozenset()  # flags the service drops with a warning
    origins: dict[str, Origin] = field(default_factory=dict)  # ENV_NAME -> where the mapping is written

    def merged(self, other: Convention) -> Convention:
        return Convention(
            {**self.flags, **other.flags},
            self.booleans | other.booleans,
            self.negatable | other.negatable,
            self.removed | other.removed,
            {**self.origins, **other.origins},
        )

    def __bool__(self) -> bool:
        return bool(self.flags)


@dataclass(frozen=True)
class ReadResult:
    """What the readers found in every path given: engine containers, conventions, files not read."""

    containers: tuple[Container, ...]
    read: tuple[tuple[str, SourceKind], ...]
    not_read: tuple[NotRead, ...]
    convention: Convention = Convention()
    companions: tuple[Container, ...] = ()  # GPU containers that run no vLLM server (Ray workers): ported, not linted
