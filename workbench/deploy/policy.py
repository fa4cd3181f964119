"""The port's mapping table (`policy/deploy/ascend-port.yaml`), read once through the one recipe reader.

Images whose entrypoint is vLLM's server, the Ascend image, environment renames, device-plugin resources,
runtime classes and what a container needs to see the NPUs: each row names its Ascend counterpart (or
`remove`), why, and where vllm-ascend documents it (pinned to a tag or commit).
"""

from __future__ import annotations

import fnmatch
import functools
from pathlib import Path

from pydantic import Field

from workbench import settings
from workbench.recipes import Frozen, load_recipe_file

REMOVE = "remove"


class ImageRow(Frozen):
    repository: str
    entrypoint: tuple[str, ...]
    cite: str


class AscendImage(Frozen):
    template: str
    entrypoint: tuple[str, ...]
    cite: tuple[str, ...]


class Rename(Frozen):
    to: str
    why: str
    cite: str

    @property
    def removes(self) -> bool:
        return self.to == REMOVE


class DockerNeeds(Frozen):
    npus_for_all: int = Field(ge=1)
    devices: tuple[str, ...]
    per_npu_device: str
    mounts: tuple[str, ...]
    shm_floor: str
    cite: str


class PortPolicy(Frozen):
    name: str
    images: tuple[ImageRow, ...] = Field(min_length=1)
    ascend_image: AscendImage
    launcher: Rename
    env: dict[str, Rename]
    resources: dict[str, Rename]
    runtime_classes: dict[str, Rename]
    docker: DockerNeeds

    def entrypoint_of(self, image: str) -> tuple[str, ...] | None:
        """The entrypoint of an image the table knows (by repository, any tag), else None."""
        repository = repository_of(image)
        row = next((r for r in self.images if r.repository == repository), None)
        return row.entrypoint if row else None

    def resource(self, name: str) -> Rename | None:
        return next((row for pattern, row in self.resources.items() if fnmatch.fnmatchcase(name, pattern)), None)


class FeatureGap(Frozen):
    """A feature a span of releases does not serve (policy/deploy/features.yaml)."""

    id: str
    flag: str
    above: float
    first: str
    last: str
    why: str
    cite: tuple[str, ...] = Field(min_length=1)

    def applies(self, value: str | None, tag: str, tags: tuple[str, ...]) -> bool:
        try:
            on = value is not None and float(value) > self.above
        except ValueError:
            return False
        return on and tag in tags and tags.index(self.first) <= tags.index(tag) <= tags.index(self.last)


class FeatureGaps(Frozen):
    name: str
    rows: tuple[FeatureGap, ...]


@functools.cache
def feature_gaps() -> FeatureGaps:
    path = settings.policy_dir() / "deploy" / "features.yaml"
    return load_recipe_file(FeatureGaps, path, what="feature gaps", required="'rows'")


def repository_of(image: str) -> str:
    """'docker.io/vllm/vllm-openai:v0.8.5' -> 'vllm/vllm-openai' (registry prefix of Docker Hub, tag and digest dropped)."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    for prefix in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    return name.removeprefix("library/")


def tag_of(image: str) -> str | None:
    last = image.split("@", 1)[0].rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def default_policy_path() -> Path:
    return settings.policy_dir() / "deploy" / "ascend-port.yaml"


@functools.cache
def _load(path: Path) -> PortPolicy:
    return load_recipe_file(PortPolicy, path, what="deployment port policy", required="'images' and 'env'")


def port_policy(path: str | Path | None = None) -> PortPolicy:
    return _load(Path(path or default_policy_path()).resolve())
