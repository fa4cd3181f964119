"""Dockerfiles -> what the image is and what it runs: `FROM` (with `ARG`s resolved), `ENV`, and
`ENTRYPOINT` + `CMD` (exec form as a list, shell form read as shell). Multi-stage files are read to the
last stage, the one `docker build` produces by default.

An image built `FROM vllm/vllm-openai` keeps that image's entrypoint (`vllm serve`) unless it sets its own;
an `ENTRYPOINT` that runs a Python file of the service hands the reading to that file (`launcher`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from workbench.deploy.expand import expand
from workbench.deploy.model import Origin, Setting

_INSTRUCTION = re.compile(r"^\s*([A-Za-z]+)\s+(.*)$", re.S)


@dataclass(frozen=True)
class Instruction:
    keyword: str
    argument: str
    line: int
    lines: tuple[tuple[int, str], ...] = ()  # the physical lines it spans

    def line_of(self, name: str) -> int:
        """The physical line that assigns `name` (a multi-line ENV writes one name per line)."""
        return next((n for n, text in self.lines if re.search(rf"(^|\s){re.escape(name)}[=\s]", text)), self.line)


@dataclass
class Image:
    """The last stage of a Dockerfile, as far as the engine is concerned."""

    where: str
    base: Setting | None = None
    args: dict[str, Setting] = field(default_factory=dict)
    env: dict[str, Setting] = field(default_factory=dict)
    entrypoint: list[tuple[str, int]] | None = None
    cmd: list[tuple[str, int]] | None = None
    copies: list[tuple[str, str]] = field(default_factory=list)  # (source in the build context, destination)

    def argv(self) -> list[tuple[str, int]]:
        return list(self.entrypoint or []) + list(self.cmd or [])


def instructions(text: str) -> list[Instruction]:
    """Logical instructions (continuation lines joined; comment lines inside them dropped), with first lines."""
    found: list[Instruction] = []
    buffer: list[str] = []
    physical: list[tuple[int, str]] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not buffer and (not stripped or stripped.startswith("#")):
            continue
        if buffer and stripped.startswith("#"):
            continue
        if not buffer:
            start = number
        buffer.append(raw.rstrip().rstrip("\\").rstrip() if raw.rstrip().endswith("\\") else raw)
        physical.append((number, raw))
        if not raw.rstrip().endswith("\\"):
            match = _INSTRUCTION.match(" ".join(buffer))
            if match:
                found.append(Instruction(match.group(1).upper(), match.group(2).strip(), start, tuple(physical)))
            buffer, physical = [], []
    return found


def read_dockerfile(text: str, where: str) -> Image:
    image = Image(where)
    for ins in instructions(text):
        if ins.keyword == "FROM":
            _from(image, ins)
        elif ins.keyword == "ARG":
            for name, value in _pairs(ins.argument, allow_bare=True):
                resolved = expand(value, image.args) if value is not None else None
                origin = Origin(where, ins.line_of(name), "ARG")
                image.args[name] = Setting(f"arg.{name}", resolved.text if resolved else None, origin)
        elif ins.keyword == "ENV":
            known = {**image.args, **image.env}
            for name, value in _pairs(ins.argument):
                resolved = expand(value or "", known)
                origin = Origin(where, ins.line_of(name), "ENV")
                image.env[name] = Setting(f"env.{name}", resolved.text, origin, resolved.origins)
        elif ins.keyword in ("ENTRYPOINT", "CMD"):
            words = _exec_form(ins)
            if ins.keyword == "ENTRYPOINT":
                image.entrypoint, image.cmd = words, None  # a new ENTRYPOINT resets an inherited CMD
            else:
                image.cmd = words
        elif ins.keyword == "COPY":
            parts = [p for p in ins.argument.split() if not p.startswith("--")]
            if len(parts) >= 2:
                image.copies.extend((src, parts[-1]) for src in parts[:-1])
    return image


def _from(image: Image, ins: Instruction) -> None:
    parts = [p for p in ins.argument.split() if not p.startswith("--platform")]
    resolved = expand(parts[0], image.args)
    image.base = Setting("image", resolved.text, Origin(image.where, ins.line, "FROM"), resolved.origins)
    image.env.clear()  # a new stage starts from its base image's environment, which is not in this file
    image.entrypoint = image.cmd = None


def _exec_form(ins: Instruction) -> list[tuple[str, int]]:
    try:
        value = json.loads(ins.argument)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return [(v, ins.line) for v in value]
    except json.JSONDecodeError:
        pass
    return [("/bin/sh", ins.line), ("-c", ins.line), (ins.argument, ins.line)]


def _pairs(argument: str, allow_bare: bool = False) -> list[tuple[str, str | None]]:
    """`A=1 B="x y"` or the legacy `A value` form -> [(name, value)]; a bare `ARG NAME` has value None."""
    from workbench.lint.shell import commands

    words = [w.text for c in commands(argument) for w in c.words]
    if words and "=" not in words[0] and not allow_bare and len(words) >= 2:
        return [(words[0], argument.split(None, 1)[1])]
    pairs: list[tuple[str, str | None]] = []
    for word in words:
        name, eq, value = word.partition("=")
        pairs.append((name, value if eq else None))
    return pairs
