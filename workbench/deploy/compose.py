"""Compose files -> engine containers: per service its image, `entrypoint` and `command` (a list, or a string
split as compose splits it; `sh -c` strings read as shell), `environment` (list or mapping), `env_file`,
`shm_size`, `runtime`, `ipc`, `devices` and `deploy.resources.reservations.devices`.

Compose interpolates `${VAR}` / `${VAR:-default}` from the shell and the `.env` file beside the compose
file before anything runs; the import does the same with the `.env` it finds and `--env NAME=VALUE`, and
names every variable nothing sets.
"""

from __future__ import annotations

from pathlib import Path

from yaml.nodes import Node, ScalarNode

from workbench.deploy import nodes
from workbench.deploy.engine import Place, from_argv
from workbench.deploy.expand import expand
from workbench.deploy.model import Container, Origin, Setting, SourceKind
from workbench.lint.shell import commands


def is_compose(doc: Node) -> bool:
    services = nodes.get(doc, "services")
    return services is not None and any(
        nodes.get(v, "image") or nodes.get(v, "build") for _, v, _ in nodes.items(services)
    )


def read_compose(text: str, where: str, outside: dict[str, Setting]) -> list[Container]:
    """Engine services of a compose file; `outside` is the interpolation environment (.env, --env)."""
    found: list[Container] = []
    for doc in nodes.documents(text, where):
        for name, service, line in nodes.items(nodes.get(doc, "services")):
            engine = _service(name, service, line, where, outside, text)
            if engine is not None:
                found.append(engine)
    return found


def read_env_file(path: Path) -> dict[str, Setting]:
    """`NAME=value` lines of a .env file (comments and blank lines skipped, quotes removed)."""
    found: dict[str, Setting] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, _, value = line.removeprefix("export ").partition("=")
        found[name.strip()] = Setting(
            f"env.{name.strip()}", value.strip().strip("\"'"), Origin(str(path), number, ".env")
        )
    return found


def _interp(
    value: str | None, where: str, line: int, via: str, outside: dict[str, Setting], missing: list[str]
) -> Setting:
    if value is None or "$" not in value:
        return Setting("", value, Origin(where, line, via))
    expanded = expand(value, outside)
    missing.extend(expanded.missing)
    return Setting("", expanded.text, Origin(where, line, via), expanded.origins)


def _service(
    name: str, node: Node, line: int, where: str, outside: dict[str, Setting], source: str
) -> Container | None:
    missing: list[str] = []
    image_node = nodes.get(node, "image")
    image = None
    if image_node is not None:
        raw = _interp(nodes.text(image_node), where, nodes.line(image_node), "image", outside, missing)
        image = Setting("image", raw.value, raw.origin, raw.resolved_from)
    env = tuple(_environment(node, where, outside, missing))
    place = Place(f"service/{name}", where, line, SourceKind.COMPOSE, image, env, (), tuple(_placement(node, where)))
    argv = _words(nodes.get(node, "entrypoint"), source) + _words(nodes.get(node, "command"), source)
    engine = from_argv(place, argv, outside, own_env=False)
    if engine is None:
        return None
    from dataclasses import replace

    return replace(engine, unresolved=tuple(dict.fromkeys((*missing, *engine.unresolved))))


def _words(node: Node | None, source: str) -> list[tuple[str, int]]:
    """A list stays a list; a string is split into words the way compose splits it (shell quoting)."""
    if isinstance(node, ScalarNode):
        text, first = nodes.shell_text(node, source)
        return [(w.text, w.line + first - 1) for command in commands(text) for w in command.words]
    return nodes.argv(node, source)


def _environment(node: Node, where: str, outside: dict[str, Setting], missing: list[str]):
    env = nodes.get(node, "environment")
    for item in nodes.elements(env):
        text = nodes.text(item) or ""
        key, eq, value = text.partition("=")
        found = _interp(value if eq else None, where, nodes.line(item), "environment", outside, missing)
        yield Setting(f"env.{key}", found.value, found.origin, found.resolved_from)
    for key, value, line in nodes.items(env):
        found = _interp(nodes.text(value), where, line, "environment", outside, missing)
        yield Setting(f"env.{key}", found.value, found.origin, found.resolved_from)


def _placement(node: Node, where: str):
    for key in ("shm_size", "runtime", "ipc", "privileged"):
        value = nodes.get(node, key)
        if value is not None:
            yield Setting(f"compose.{key}", nodes.text(value), Origin(where, nodes.line(value), key))
    for device in nodes.elements(nodes.get(node, "devices")):
        yield Setting("compose.device", nodes.text(device), Origin(where, nodes.line(device), "devices"))
    for device in nodes.elements(nodes.get(node, "deploy", "resources", "reservations", "devices")):
        driver = nodes.text(nodes.get(device, "driver")) or "?"
        count = nodes.text(nodes.get(device, "count")) or ",".join(
            t for t, _ in nodes.strings(nodes.get(device, "device_ids"))
        )
        yield Setting(
            "compose.gpu_reservation",
            f"{driver}:{count or 'all'}",
            Origin(where, nodes.line(device), "deploy.resources"),
        )
