"""Variables in a value: `$VAR`, `${VAR}`, `${VAR:-default}` (shell and compose) and `$(VAR)` (a Kubernetes
container's reference to its own environment), replaced from what the deployment sets, each replacement
remembered with where it was set. What nothing sets stays as written and is named, never guessed."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from workbench.deploy.model import Origin, Setting

_VAR = re.compile(
    r"\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-=+?])(?P<default>[^}]*))?\}"
    r"|\$\((?P<kube>[A-Za-z_][A-Za-z0-9_]*)\)"
    r"|\$(?P<plain>[A-Za-z_][A-Za-z0-9_]*)"
)


@dataclass(frozen=True)
class Expanded:
    text: str
    origins: tuple[Origin, ...] = ()
    missing: tuple[str, ...] = ()


def expand(text: str, env: Mapping[str, Setting]) -> Expanded:
    """`text` with the variables `env` knows replaced; a `${VAR:-default}` nothing sets takes its default."""
    origins: list[Origin] = []
    missing: list[str] = []

    def replace(match: re.Match[str]) -> str:
        name = match.group("braced") or match.group("kube") or match.group("plain")
        known = env.get(name)
        op, default = match.group("op"), match.group("default")
        if known is not None and known.value is not None and not (op and op.startswith(":") and known.value == ""):
            if op in ("+", ":+"):
                return default or ""
            origins.append(known.origin)
            return known.value
        if op in ("-", ":-", "=", ":="):
            return default or ""
        if op in ("+", ":+"):
            return ""
        missing.append(name)
        return match.group(0)

    return Expanded(_VAR.sub(replace, text), tuple(origins), tuple(dict.fromkeys(missing)))


def variables_in(text: str) -> tuple[str, ...]:
    """The names a value refers to, in order."""
    return tuple(m.group("braced") or m.group("kube") or m.group("plain") for m in _VAR.finditer(text))
