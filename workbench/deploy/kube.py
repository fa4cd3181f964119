"""Kubernetes manifests (one or many documents, `helm template` output too) -> engine containers.

Any pod template is read wherever it sits — Deployment, StatefulSet, Job, CronJob, Pod, LeaderWorkerSet
(leader and worker templates), or another workload resource — by finding the mappings that hold
`containers:`. Per container: `command` + `args` (a `sh -c` script read as shell), `env` (`value`,
`valueFrom` named as such, `$(VAR)` references resolved), `envFrom` (ConfigMaps of the same input read),
`resources`, and from its pod `runtimeClassName`, `nodeSelector` and the volume mounted at /dev/shm.
"""

from __future__ import annotations

import re

from yaml.nodes import MappingNode, Node

from workbench.deploy import nodes
from workbench.deploy.engine import Place, from_argv
from workbench.deploy.model import Container, Origin, Setting, SourceKind

_SOURCE = re.compile(r"^# Source: (\S+)", re.M)


def read_manifests(text: str, where: str, configmaps: dict[str, dict[str, Setting]] | None = None) -> list[Container]:
    """Engine containers of every document; `configmaps` (name -> data) feeds `envFrom`."""
    docs = nodes.documents(text, where)
    maps = {**(configmaps or {}), **config_maps(docs, where)}
    rendered = _templates(text)
    kind = SourceKind.HELM_RENDERED if rendered else SourceKind.KUBERNETES
    found: list[Container] = []
    for doc in docs:
        resource = (
            f"{nodes.text(nodes.get(doc, 'kind')) or '?'}/{nodes.text(nodes.get(doc, 'metadata', 'name')) or '?'}"
        )
        template = _template_at(rendered, nodes.line(doc))
        for pod in _pod_specs(doc):
            for container in nodes.elements(nodes.get(pod, "containers")):
                engine = _container(container, pod, resource, where, kind, maps, text)
                if engine is not None:
                    notes = (f"rendered from {template}",) if template else ()
                    found.append(_with_notes(engine, notes))
    return found


def config_maps(docs: list[Node], where: str) -> dict[str, dict[str, Setting]]:
    maps: dict[str, dict[str, Setting]] = {}
    for doc in docs:
        if nodes.text(nodes.get(doc, "kind")) == "ConfigMap":
            name = nodes.text(nodes.get(doc, "metadata", "name")) or "?"
            maps[name] = {
                key: Setting(f"env.{key}", nodes.text(value), Origin(where, line, f"ConfigMap {name}"))
                for key, value, line in nodes.items(nodes.get(doc, "data"))
            }
    return maps


def _templates(text: str) -> list[tuple[int, str]]:
    """(line, template) of every `# Source:` comment of `helm template` output."""
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in _SOURCE.finditer(text)]


def _template_at(rendered: list[tuple[int, str]], line: int) -> str | None:
    before = [t for at, t in rendered if at <= line]
    return before[-1] if before else None


def _pod_specs(doc: Node) -> list[Node]:
    return [n for n in nodes.walk(doc) if isinstance(n, MappingNode) and nodes.get(n, "containers") is not None]


def _container(
    node: Node, pod: Node, resource: str, where: str, kind: SourceKind, maps, source: str
) -> Container | None:
    name = nodes.text(nodes.get(node, "name")) or "?"
    image_node = nodes.get(node, "image")
    image = (
        Setting("image", nodes.text(image_node), Origin(where, nodes.line(image_node), "image")) if image_node else None
    )
    env = _env(node, where, maps)
    place = Place(
        f"{resource}/{name}",
        where,
        nodes.line(node),
        kind,
        image,
        env,
        _resources(node, where),
        _placement(pod, node, where),
    )
    argv = nodes.argv(nodes.get(node, "command"), source) + nodes.argv(nodes.get(node, "args"), source)
    engine = from_argv(place, argv)
    if engine is None and _uses_gpu(place):
        # not a server itself (a Ray worker of a multi-node group), but it runs on the GPUs: ported with its pod
        return Container(place.name, where, place.line, kind, "", image, (), env, place.resources, place.placement)
    return engine


def _uses_gpu(place: Place) -> bool:
    from workbench.deploy.facts import VLLM_IMAGES
    from workbench.deploy.policy import repository_of

    gpu = any("nvidia.com/" in s.key for s in place.resources)
    return gpu or (place.image is not None and repository_of(place.image.value or "") in VLLM_IMAGES)


def _env(node: Node, where: str, maps) -> tuple[Setting, ...]:
    found: list[Setting] = []
    for ref in nodes.elements(nodes.get(node, "envFrom")):
        source = nodes.text(nodes.get(ref, "configMapRef", "name"))
        if source in maps:
            found.extend(maps[source].values())
    for item in nodes.elements(nodes.get(node, "env")):
        name = nodes.text(nodes.get(item, "name")) or "?"
        value = nodes.get(item, "value")
        origin = Origin(where, nodes.line(item), "env")
        if value is not None:
            found.append(Setting(f"env.{name}", nodes.text(value), origin))
        else:
            found.append(Setting(f"env.{name}", _value_from(nodes.get(item, "valueFrom")), origin))
    return tuple(found)


def _value_from(node: Node | None) -> str:
    for key, value, _ in nodes.items(node):
        parts = [nodes.text(v) or "" for _, v, _ in nodes.items(value)]
        return f"<{key}: {'/'.join(p for p in parts if p)}>"
    return "<valueFrom>"


def _resources(node: Node, where: str) -> tuple[Setting, ...]:
    found: list[Setting] = []
    for section in ("limits", "requests"):
        for key, value, line in nodes.items(nodes.get(node, "resources", section)):
            found.append(
                Setting(f"resource.{section}.{key}", nodes.text(value), Origin(where, line, f"resources.{section}"))
            )
    return tuple(found)


def _placement(pod: Node, node: Node, where: str) -> tuple[Setting, ...]:
    found: list[Setting] = []
    runtime = nodes.get(pod, "runtimeClassName")
    if runtime is not None:
        found.append(
            Setting("pod.runtimeClassName", nodes.text(runtime), Origin(where, nodes.line(runtime), "pod spec"))
        )
    for key, value, line in nodes.items(nodes.get(pod, "nodeSelector")):
        found.append(Setting(f"pod.nodeSelector.{key}", nodes.text(value), Origin(where, line, "pod spec")))
    shm = _shm_volume(pod, node)
    if shm is not None:
        found.append(Setting("pod.shm", shm[0], Origin(where, shm[1], "emptyDir at /dev/shm")))
    return tuple(found)


def _shm_volume(pod: Node, node: Node) -> tuple[str, int] | None:
    mounted = {
        nodes.text(nodes.get(m, "name"))
        for m in nodes.elements(nodes.get(node, "volumeMounts"))
        if nodes.text(nodes.get(m, "mountPath")) == "/dev/shm"
    }
    for volume in nodes.elements(nodes.get(pod, "volumes")):
        if nodes.text(nodes.get(volume, "name")) in mounted:
            size = nodes.get(volume, "emptyDir", "sizeLimit")
            return (nodes.text(size) or "unlimited", nodes.line(size or volume))
    return None


def _with_notes(container: Container, notes: tuple[str, ...]) -> Container:
    from dataclasses import replace

    return replace(container, notes=(*container.notes, *notes)) if notes else container
