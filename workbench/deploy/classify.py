"""Which reader a file gets: by name first (Dockerfile, scripts, Python, .env), then by content for YAML
(compose, Kubernetes manifests or `helm template` output, `vllm serve --config`) and JSON (environment
templates). Everything else is named with the reason it was not read."""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

from workbench.deploy.model import SourceKind

_DOCKERFILES = ("Dockerfile", "Dockerfile.*", "*.Dockerfile", "*.dockerfile", "Containerfile*")
_SHELL_SUFFIXES = {".sh", ".bash"}
_HELM_TEMPLATE_SUFFIXES = {".tpl", ".gotmpl"}


def kind_by_name(path: Path) -> SourceKind | None:
    name = path.name
    if any(fnmatch.fnmatchcase(name, p) for p in _DOCKERFILES):
        return SourceKind.DOCKERFILE
    if path.suffix in _SHELL_SUFFIXES:
        return SourceKind.SHELL
    if path.suffix == ".py":
        return SourceKind.PYTHON
    if name == ".env" or path.suffix == ".env":
        return SourceKind.ENV_TEMPLATE
    if path.suffix == "" and _shebang_shell(path):
        return SourceKind.SHELL
    return None


def _shebang_shell(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            head = handle.read(64)
    except OSError:
        return False
    return head.startswith(b"#!") and any(s in head.split(b"\n", 1)[0] for s in (b"sh", b"bash"))


def skip_reason(path: Path, chart_root: Path | None) -> str | None:
    """Why a file is not read at all (before its content is looked at), or None."""
    if chart_root is not None:
        relative = path.relative_to(chart_root)
        if relative.parts[0] == "templates" or path.suffix in _HELM_TEMPLATE_SUFFIXES:
            return "a Helm template: read through `helm template` output"
        if path.name.startswith("values") and path.suffix in (".yaml", ".yml"):
            return "chart values: read through the rendered chart"
        if relative.parts[0] in ("tests", "ci"):
            return "chart tests: not part of a release"
        return "part of a Helm chart: read through `helm template` output"
    if path.suffix in _HELM_TEMPLATE_SUFFIXES:
        return "a Go template (.tpl): read through `helm template` output"
    if path.suffix in (".tf", ".hcl", ".tfvars"):
        return "Terraform/HCL: the import reads what it deploys (manifests, compose files), not the infrastructure code"
    return None


def walk_files(root: Path, ignores: tuple[str, ...]) -> list[Path]:
    """Files under `root`, sorted, skipping ignored directory names (.git, caches, virtual environments)."""
    found: list[Path] = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not any(fnmatch.fnmatchcase(d, p) for p in ignores))
        found.extend(Path(directory) / f for f in sorted(files))
    return found
