"""Read every path given (files, directories, chart directories) into engine containers (docs/METHOD.md §1).

The readers per kind live in their own modules; this one decides which file goes where, keeps the files
that were not read with their reason, and joins what belongs together: a Dockerfile's environment with the
launcher its `ENTRYPOINT` runs, an environment convention with the environments that feed it (each
environment template is one deployment of the image), and `--config FILE` with the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from workbench.deploy import compose, convention, helm, kube, pysource, vllm_config
from workbench.deploy.classify import kind_by_name, skip_reason, walk_files
from workbench.deploy.dockerfile import Image, read_dockerfile
from workbench.deploy.engine import Place, from_argv, from_launch
from workbench.deploy.model import Container, Convention, NotRead, Origin, ReadResult, Setting, SourceKind
from workbench.deploy.scripts import read_script
from workbench.deploy.templates import read_env_template
from workbench.errors import WorkbenchError

IGNORES = (
    ".git",
    ".hg",
    ".svn",
    "__pycache__",
    ".venv",
    "venv",
    ".tox",
    "node_modules",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".ipynb_checkpoints",
    "*.egg-info",
)


@dataclass
class _State:
    env: dict[str, Setting]
    values: tuple[Path, ...]
    containers: list[Container] = field(default_factory=list)
    read: list[tuple[str, SourceKind]] = field(default_factory=list)
    not_read: list[NotRead] = field(default_factory=list)
    images: list[tuple[Path, Image]] = field(default_factory=list)
    python: dict[Path, tuple[object, str]] = field(default_factory=dict)
    templates: list[tuple[Path, tuple[Setting, ...]]] = field(default_factory=list)
    configs: dict[Path, tuple[Setting, ...]] = field(default_factory=dict)
    convention: Convention = field(default_factory=Convention)


def read_paths(
    paths: tuple[Path, ...], env: dict[str, Setting], values: tuple[Path, ...] = (), mapping: Convention | None = None
) -> ReadResult:
    """Everything under `paths`; a path that does not exist is one clear error."""
    state = _State(dict(env), values, convention=mapping or Convention())
    for path in paths:
        if not path.exists():
            raise WorkbenchError(f"{path}: no such file or directory; give deployment files or the service's directory")
        if helm.is_chart(path):
            _chart(state, path, None)
        elif path.is_dir():
            _directory(state, path)
        else:
            _file(state, path, None)  # a file given by name: its problem is the import's one error
    _join(state)
    engines = tuple(c for c in state.containers if c.launcher)
    companions = tuple(c for c in state.containers if not c.launcher)
    return ReadResult(engines, tuple(state.read), tuple(state.not_read), state.convention, companions)


def _directory(state: _State, root: Path) -> None:
    charts = sorted({p.parent for p in root.rglob("Chart.yaml") if not any(part in IGNORES for part in p.parts)})
    for chart in charts:
        _chart(state, chart, None)
    for path in walk_files(root, IGNORES):
        chart = next((c for c in charts if c in path.parents), None)
        if chart is None:
            try:
                _file(state, path, None)
            except WorkbenchError as exc:  # one malformed file of a tree is named, the rest is still read
                state.not_read.append(NotRead(str(path), f"not read: {exc}"))
        elif path.name != "Chart.yaml":
            state.not_read.append(NotRead(str(path), skip_reason(path, chart) or "part of a Helm chart"))


def _chart(state: _State, chart: Path, _unused: None) -> None:
    rendered = helm.render(chart, state.values)
    if rendered is None:
        state.not_read.append(NotRead(str(chart), helm.render_instructions(chart, state.values)))
        return
    where = f"{chart} (helm template)"
    state.read.append((where, SourceKind.HELM_RENDERED))
    state.containers.extend(kube.read_manifests(rendered, where))


def _file(state: _State, path: Path, _unused: None) -> None:
    skip = skip_reason(path, None)
    if skip is not None:
        state.not_read.append(NotRead(str(path), skip))
        return
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        state.not_read.append(NotRead(str(path), f"cannot be read as text ({type(exc).__name__})"))
        return
    kind = kind_by_name(path)
    reader = _BY_KIND.get(kind) if kind else _by_content(path)
    if reader is None:
        state.not_read.append(NotRead(str(path), "not a kind of deployment file the import reads"))
        return
    found = reader(state, path, text)
    if found is None:
        state.not_read.append(
            NotRead(str(path), _NOTHING.get(kind or SourceKind.KUBERNETES, "nothing the import reads"))
        )
    else:
        state.read.append((str(path), found))


def _by_content(path: Path):
    if path.suffix in (".yaml", ".yml"):
        return _yaml
    if path.suffix == ".json":
        return _json
    return None


def _shell(state: _State, path: Path, text: str) -> SourceKind | None:
    place = Place(str(path), str(path), 1, SourceKind.SHELL)
    found = [c for launch in read_script(text, str(path), state.env).launches if (c := from_launch(place, launch))]
    state.containers.extend(replace(c, name=f"{path.name}:{c.line}") for c in found)
    return SourceKind.SHELL if found else None


def _dockerfile(state: _State, path: Path, text: str) -> SourceKind | None:
    state.images.append((path, read_dockerfile(text, str(path))))
    return SourceKind.DOCKERFILE


def _python(state: _State, path: Path, text: str) -> SourceKind | None:
    tree = pysource.parse(text, str(path)) if pysource.worth_parsing(text) else None
    if tree is None:
        return None
    found = pysource.convention(tree, text, str(path))
    if found:
        state.convention = state.convention.merged(found)
    state.python[path] = (tree, text)
    launches = pysource.launches(tree, str(path))
    for launch in (launch for launch in launches if launch.launcher != "vllm serve"):
        state.containers.append(
            Container(
                f"{path.name}:{launch.line}",
                str(path),
                launch.line,
                SourceKind.PYTHON,
                launch.launcher,
                flags=launch.flags,
            )
        )
    if found:
        return SourceKind.CONVENTION
    return SourceKind.PYTHON if launches else None


def _env_file(state: _State, path: Path, text: str) -> SourceKind | None:
    found = compose.read_env_file(path)
    state.env.update(found)
    state.templates.append((path, tuple(found.values())))
    return SourceKind.ENV_TEMPLATE


def _json(state: _State, path: Path, text: str) -> SourceKind | None:
    found = read_env_template(path, text)
    if found is None:
        return None
    state.templates.append((path, found))
    return SourceKind.ENV_TEMPLATE


def _yaml(state: _State, path: Path, text: str) -> SourceKind | None:
    from workbench.deploy import nodes

    docs = nodes.documents(text, str(path))
    if any(compose.is_compose(d) for d in docs):
        dotenv = path.parent / ".env"
        outside = {**(compose.read_env_file(dotenv) if dotenv.is_file() else {}), **state.env}
        state.containers.extend(compose.read_compose(text, str(path), outside))
        return SourceKind.COMPOSE
    if any(nodes.get(d, "apiVersion") is not None and nodes.get(d, "kind") is not None for d in docs):
        found = kube.read_manifests(text, str(path))
        state.containers.extend(found)
        return SourceKind.HELM_RENDERED if "# Source: " in text else SourceKind.KUBERNETES
    if len(docs) == 1 and vllm_config.is_vllm_config(docs[0]):
        state.configs[path.resolve()] = vllm_config.read_config(docs[0], str(path))
        return SourceKind.VLLM_CONFIG
    return None


_BY_KIND = {
    SourceKind.SHELL: _shell,
    SourceKind.DOCKERFILE: _dockerfile,
    SourceKind.PYTHON: _python,
    SourceKind.ENV_TEMPLATE: _env_file,
}
_NOTHING = {
    SourceKind.SHELL: "a script that starts no vLLM server",
    SourceKind.PYTHON: "Python that starts no vLLM engine and declares no environment convention",
    SourceKind.KUBERNETES: "YAML or JSON that is neither a manifest, a compose file, a `vllm serve --config` file nor an environment template",
}


def _join(state: _State) -> None:
    for path, image in state.images:
        state.containers.extend(_image_containers(state, path, image))
    used = {c for c in state.containers if any(s.key == "flag.--config" for s in c.flags)}
    state.containers[:] = [_with_config(state, c) if c in used else c for c in state.containers]
    referenced = {Path(s.value or "").name for c in used for s in c.flags if s.key == "flag.--config"}
    for path, settings in state.configs.items():
        name = f"vllm serve --config {path.name}"
        state.containers.append(
            Container(
                name,
                str(path),
                1,
                SourceKind.VLLM_CONFIG,
                "vllm serve --config",
                flags=settings,
                notes=_config_note(path, referenced),
            )
        )


def _config_note(path: Path, referenced: set[str]) -> tuple[str, ...]:
    return (f"{path.name} is also read where a deployment passes it with --config",) if path.name in referenced else ()


def _image_containers(state: _State, path: Path, image: Image) -> list[Container]:
    """The engine containers an image runs: one per environment template of the same tree (or one)."""
    env = tuple(image.env.values())
    templates = [t for t in state.templates if path.parent in t[0].parents or t[0].parent == path.parent] or [
        (None, ())
    ]
    found: list[Container] = []
    for template, extra in templates:
        place = Place(
            f"{path.name}" + (f" + {template.name}" if template else ""),
            str(path),
            image.base.origin.line if image.base else 1,
            SourceKind.DOCKERFILE,
            image.base,
            (*env, *extra),
        )
        container = _image_launch(state, path, image, place)
        if container is not None:
            found.append(container)
    return found


def _image_launch(state: _State, path: Path, image: Image, place: Place) -> Container | None:
    argv = image.argv()
    if image.entrypoint is None and image.base is not None:
        from workbench.deploy.policy import port_policy

        inherited = port_policy().entrypoint_of(image.base.value or "")
        if inherited:
            argv = [(w, image.base.origin.line) for w in inherited] + list(image.cmd or [])
    script = _launched_python(path, image, argv, state)
    if script is None:
        found = from_argv(place, argv)
        if found is not None and image.entrypoint is None and argv[:2] != list(image.cmd or [])[:2]:
            found = replace(found, launcher="image entrypoint (vllm serve)")  # the base image's, not this file's
        return found
    tree, _text = state.python[script]
    serve = next((launch for launch in pysource.launches(tree, str(script)) if launch.launcher == "vllm serve"), None)
    if serve is None:
        return None
    flags = (*serve.flags, *(convention.apply(state.convention, place.env) if serve.env_flags else ()))
    note = f"{path.name} runs {script.name}, which starts `vllm serve`" + (
        " with flags made from the environment (the service's convention)" if serve.env_flags else ""
    )
    return Container(
        place.name,
        place.where,
        place.line,
        SourceKind.DOCKERFILE,
        "vllm serve",
        place.image,
        flags,
        place.env,
        notes=(note,),
    )


def _launched_python(path: Path, image: Image, argv: list[tuple[str, int]], state: _State) -> Path | None:
    """The service's Python file an `ENTRYPOINT ["python3", "/src/main.py"]` runs, through the image's COPY lines."""
    for word, _line in argv:
        if not word.endswith(".py"):
            continue
        for source, destination in image.copies:
            destination = destination.rstrip("/")
            if word.startswith(destination + "/"):
                candidate = (path.parent / source / word[len(destination) + 1 :]).resolve()
                if candidate in {p.resolve() for p in state.python}:
                    return next(p for p in state.python if p.resolve() == candidate)
    return None


def _with_config(state: _State, container: Container) -> Container:
    """`--config FILE` expanded in place: the file's settings first, the command line's own win (vLLM's order)."""
    setting = next(s for s in container.flags if s.key == "flag.--config")
    path = next((p for p in state.configs if p.name == Path(setting.value or "").name), None)
    if path is None:
        return replace(
            container, notes=(*container.notes, f"--config {setting.value}: the file is not among the paths read")
        )
    via = Origin(setting.origin.file, setting.origin.line, f"--config {path.name}")
    from_file = tuple(replace(s, resolved_from=(via,)) for s in state.configs[path])
    return replace(container, flags=(*from_file, *container.flags))
