"""From a command as a deployment writes it to an engine `Container`: find vLLM's server in it (directly,
behind `sh -c`, behind `docker run`, or as the entrypoint of a known image) and read its flags.

Every reader (script, Dockerfile, manifest, compose file) ends here, so one rule decides what counts as an
engine container: a command that starts vLLM's OpenAI server. A container that runs something else is not
one (a router, a cache server), and an image whose entrypoint the port table does not know is read only
when its own arguments say vLLM (`--model ...`), with a note that says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from workbench.deploy.argv import launcher_of, read_flags, words_at
from workbench.deploy.expand import expand
from workbench.deploy.model import Container, Origin, Setting, SourceKind
from workbench.deploy.policy import port_policy
from workbench.deploy.scripts import DockerRun, Launch, read_script
from workbench.lint.shell import Word

SHELLS = {"sh", "bash", "dash", "zsh"}


@dataclass(frozen=True)
class Place:
    """Where a container is declared and what the deployment gives it besides its command."""

    name: str
    where: str
    line: int
    kind: SourceKind
    image: Setting | None = None
    env: tuple[Setting, ...] = ()
    resources: tuple[Setting, ...] = ()
    placement: tuple[Setting, ...] = ()


def env_map(settings: Sequence[Setting]) -> dict[str, Setting]:
    return {s.name: s for s in settings if s.kind == "env"}


def from_argv(
    place: Place, argv: Sequence[tuple[str, int]], interpolate: Mapping[str, Setting] = {}, own_env: bool = True
) -> Container | None:
    """The engine container of a process whose argument vector (entrypoint + command) is `argv`.

    `own_env`: whether `$VAR` in the command is the container's own environment (a manifest's `$(VAR)`, a
    shell) or only `interpolate` (compose substitutes from the shell and `.env` before anything runs)."""
    texts = [t for t, _ in argv]
    env = {**interpolate, **(env_map(place.env) if own_env else {})}
    if len(texts) >= 3 and texts[0].rsplit("/", 1)[-1] in SHELLS and "-c" in texts[1:3]:
        script, line = argv[texts.index("-c") + 1]
        for launch in read_script(script, place.where, env, line).launches:
            found = from_launch(place, launch)
            if found is not None:
                return found
        return None
    launcher = launcher_of(texts)
    words = words_at(texts, [ln for _, ln in argv])
    if launcher is not None:
        return _container(place, launcher, words, env)
    if place.image is not None and port_policy().entrypoint_of(place.image.value or "") == ("vllm", "serve"):
        return _container(place, "image entrypoint (vllm serve)", words, env)
    if place.image is not None and "vllm" in (place.image.value or "") and any(t.startswith("--model") for t in texts):
        note = f"the entrypoint of {place.image.value} is not in policy/deploy/ascend-port.yaml; read as `vllm serve` because its arguments are vLLM flags"
        found = _container(place, "image entrypoint (assumed vllm serve)", words, env)
        return replace(found, notes=(note,)) if found else None
    return None


def from_launch(place: Place, launch: Launch) -> Container | None:
    """A launch found in shell text; a `docker run` brings its image, options and arguments."""
    given = set(place.env)
    script_env = tuple(s for s in launch.env.values() if s not in given)  # what the script itself set
    if launch.docker is None:
        words = launch.words
        start = next(i for i, w in enumerate(words) if launcher_of([x.text for x in words[i:]]) is not None)
        prefix = tuple(_env_setting(w, place.where) for w in words[:start] if "=" in w.text)
        merged = replace(place, env=(*place.env, *script_env, *prefix))
        return _container(merged, launch.launcher or "", words, env_map(merged.env))
    docker = launch.docker
    image = Setting("image", docker.image.text, Origin(place.where, docker.image.line, "docker run"))
    env, placement = _docker_options(docker, place.where, launch.env)
    merged = Place(place.name, place.where, docker.image.line, place.kind, image, (*place.env, *env), (), placement)
    args = [(w.text, w.line) for w in docker.args]
    entry = next((v for o, v, _ in docker.options if o == "--entrypoint"), None)
    if entry:
        args = [(entry, docker.image.line), *args]
    return from_argv(merged, args, launch.env)


def _container(place: Place, launcher: str, words: tuple[Word, ...], env: Mapping[str, Setting]) -> Container:
    flags = read_flags(words, place.where, env, "command line")
    command = next((w for w in words if w.text.rsplit("/", 1)[-1] == "vllm"), None)
    if command is not None and command.text.startswith("/"):  # a GPU image's own path to the command
        place = replace(
            place,
            placement=(
                *place.placement,
                Setting("launcher", command.text, Origin(place.where, command.line, "command")),
            ),
        )
    return Container(
        name=place.name,
        source=place.where,
        line=place.line,
        kind=place.kind,
        launcher=launcher,
        image=place.image,
        flags=flags.flags,
        env=place.env,
        resources=place.resources,
        placement=place.placement,
        unresolved=flags.unresolved,
    )


def _env_setting(word: Word, where: str) -> Setting:
    name, _, value = word.text.partition("=")
    return Setting(f"env.{name}", value, Origin(where, word.line, "prefix"))


def _docker_options(
    docker: DockerRun, where: str, known: Mapping[str, Setting]
) -> tuple[tuple[Setting, ...], tuple[Setting, ...]]:
    env: list[Setting] = []
    placement: list[Setting] = []
    for option, value, line in docker.options:
        origin = Origin(where, line, f"docker run {option}")
        if option in ("-e", "--env") and value:
            name, eq, raw = value.partition("=")
            given = expand(raw, known) if eq else None
            resolved = given.text if given else (known[name].value if name in known else None)
            env.append(Setting(f"env.{name}", resolved, origin, given.origins if given else ()))
        elif option in ("--gpus", "--runtime", "--shm-size", "--ipc", "--device", "--privileged"):
            placement.append(Setting(f"docker.{option.lstrip('-')}", value, origin))
        elif option in ("-v", "--volume", "--mount"):
            placement.append(Setting("docker.volume", value, origin))
    return tuple(env), tuple(placement)
