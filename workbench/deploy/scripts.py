"""Shell text -> the vLLM launches in it: `vllm serve ...`, `python -m vllm.entrypoints.openai.api_server ...`,
`docker run ... IMAGE args` (with the image's entrypoint), and `sh -c "..."` wrappers, read with lint's shell
word reader (`workbench.lint.shell`). Variables assigned or exported before a launch are its environment.

Used for scripts, and for the shell text inside a Dockerfile's shell-form `ENTRYPOINT`/`CMD`, a manifest's
`sh -c` command and a compose `command`/`entrypoint` string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from workbench.deploy.argv import launcher_of
from workbench.deploy.expand import expand
from workbench.deploy.model import Origin, Setting
from workbench.lint.shell import Command, Word, commands

_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
# Words that open or continue a compound command: what follows them is read as a command of its own.
# Conditions are not evaluated: `if [ -n "$X" ]; then ARGS="$ARGS --flag $X"; fi` counts the assignment.
_KEYWORDS = {"then", "else", "do", "elif", "if", "while", "until", "{", "!"}
_SHELLS = {"sh", "bash", "/bin/sh", "/bin/bash", "/usr/bin/env", "dash", "zsh"}
# `docker run` options that take a value (the rest are switches); a value may also follow `=`.
_DOCKER_VALUED = frozenset(
    "-e --env --env-file -v --volume --device -p --publish --name --gpus --runtime --shm-size --ipc --network "
    "--net --entrypoint -w --workdir -u --user --mount -l --label --cpus -m --memory --platform --ulimit "
    "--cap-add --cap-drop --security-opt --group-add --add-host -h --hostname --restart --pull --log-driver "
    "--log-opt --memory-swap --cpuset-cpus --pid --uts --cgroupns --tmpfs --stop-signal --health-cmd".split()
)


@dataclass(frozen=True)
class DockerRun:
    image: Word
    options: tuple[tuple[str, str | None, int], ...]  # (option, value, line)
    args: tuple[Word, ...]  # after the image: the entrypoint's arguments


@dataclass(frozen=True)
class Launch:
    """One command that starts (or may start) a vLLM server."""

    words: tuple[Word, ...]
    launcher: str | None  # 'vllm serve' / 'api_server', None for a docker run of an image to look up
    env: dict[str, Setting] = field(default_factory=dict)  # what the script set or exported before it
    docker: DockerRun | None = None


@dataclass(frozen=True)
class ScriptRead:
    launches: tuple[Launch, ...]
    assignments: dict[str, Setting]
    flag_vars: dict[str, tuple[str, Origin]]  # VAR -> (--flag, where `--flag $VAR` is written)


def read_script(text: str, where: str, env: dict[str, Setting], first_line: int = 1, via: str = "") -> ScriptRead:
    """The launches of `text` (line numbers counted from `first_line` of `where`)."""
    known = dict(env)
    launches: list[Launch] = []
    flag_vars: dict[str, tuple[str, Origin]] = {}
    for command in commands(text, where):
        words = tuple(replace(w, line=w.line + first_line - 1) for w in command.words)
        while words and words[0].text in _KEYWORDS:
            words = words[1:]
        if not words:
            continue
        _note_flag_vars(words, where, flag_vars)
        words = _assign(words, where, known, via)
        if not words:
            continue
        launches.extend(_launches(Command(_split_expansions(words, known, where)), where, known, via))
    return ScriptRead(tuple(launches), known, flag_vars)


def _assign(words: tuple[Word, ...], where: str, known: dict[str, Setting], via: str) -> tuple[Word, ...]:
    """Record `VAR=x`, `export VAR=x` and `VAR=x cmd` assignments; return the words of the command left."""
    if words[0].text in ("export", "declare", "local", "readonly"):
        for word in words[1:]:
            _record(word, where, known, via)
        return ()
    i = 0
    while i < len(words) and _ASSIGN.match(words[i].text) and not words[i].text.startswith("-"):
        _record(words[i], where, known, via)
        i += 1
    return words[i:]


def _record(word: Word, where: str, known: dict[str, Setting], via: str) -> None:
    match = _ASSIGN.match(word.text)
    if match is None:
        return
    value = expand(match.group(2), known)
    origin = Origin(where, word.line, via or "assignment")
    known[match.group(1)] = Setting(f"env.{match.group(1)}", value.text, origin, value.origins)


def _split_expansions(words: tuple[Word, ...], known: dict[str, Setting], where: str) -> tuple[Word, ...]:
    """An unquoted `$ARGS` that holds several words is word-split, as the shell does (`vllm serve $MODEL $ARGS`);
    the words it brings carry the line of the assignment that wrote them."""
    out: list[Word] = []
    for word in words:
        if word.quoted or not word.text.startswith("$"):
            out.append(word)
            continue
        expanded = expand(word.text, known)
        parts = expanded.text.split()
        if len(parts) <= 1 or expanded.missing:
            out.append(word)
            continue
        origin = next((o for o in expanded.origins if o.file == where), None)
        line = origin.line if origin is not None else word.line
        out.extend(Word(part, -1, -1, line) for part in parts)
    return tuple(out)


def _note_flag_vars(words: tuple[Word, ...], where: str, found: dict[str, tuple[str, Origin]]) -> None:
    """`--max-model-len "$MAX_MODEL_LEN"` or `--max-model-len=${MAX_MODEL_LEN}`: the script's own convention."""
    for i, word in enumerate(words):
        flag, _, inline = word.text.partition("=")
        if not flag.startswith("--"):
            continue
        value = inline if inline else (words[i + 1].text if i + 1 < len(words) else "")
        match = re.fullmatch(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)(?::?-[^}]*)?\}?", value)
        if match:
            found.setdefault(match.group(1), (flag, Origin(where, word.line, "script")))


def _launches(command: Command, where: str, known: dict[str, Setting], via: str) -> list[Launch]:
    words = command.words
    texts = [w.text for w in words]
    base = texts[0].rsplit("/", 1)[-1]
    if (texts[0] in _SHELLS or base in _SHELLS) and "-c" in texts[:3]:
        return _nested(words, texts.index("-c"), where, known, via)
    if base in ("docker", "podman", "nerdctl") and "run" in texts[1:3]:
        docker = _docker_run(words[texts.index("run") + 1 :])
        if docker is not None:
            return [Launch(words, launcher_of([w.text for w in docker.args]), dict(known), docker)]
        return []
    launcher = launcher_of(texts)
    return [Launch(words, launcher, dict(known))] if launcher else []


def _nested(words: tuple[Word, ...], at: int, where: str, known: dict[str, Setting], via: str) -> list[Launch]:
    if at + 1 >= len(words):
        return []
    inner = words[at + 1]
    read = read_script(inner.text, where, known, inner.line, via)
    known.update(read.assignments)
    return list(read.launches)


def _docker_run(words: tuple[Word, ...]) -> DockerRun | None:
    options: list[tuple[str, str | None, int]] = []
    i = 0
    while i < len(words):
        text = words[i].text
        if text == "--":
            i += 1
            break
        if not text.startswith("-"):
            break
        name, eq, inline = text.partition("=")
        if eq:
            options.append((name, inline, words[i].line))
        elif name in _DOCKER_VALUED and i + 1 < len(words):
            options.append((name, words[i + 1].text, words[i].line))
            i += 1
        else:
            options.append((name, None, words[i].line))
        i += 1
    if i >= len(words):
        return None
    return DockerRun(words[i], tuple(options), words[i + 1 :])
