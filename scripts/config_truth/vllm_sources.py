"""vLLM's own settings per version, read from its source distributions on PyPI.

vllm-ascend runs on the vLLM version its release pairs with (recipes/matrices/vllm-ascend.yaml), so a
serving command for v0.11.0 must be judged against vLLM 0.11.0's flags and `VLLM_*` variables, not the
vLLM installed here. vLLM's repository is too large to mirror, but every release's sdist is on PyPI
(about 10 MB); this module downloads the ones the matrix names (sha256-checked against the index),
keeps only the files it reads, and extracts:

- `VLLM_*` variables: the keys of `environment_variables` in `vllm/envs.py`;
- serving flags: every literal `"--flag"` given to `add_argument` in the engine and server argument
  modules, plus the fields of the frontend-argument dataclasses newer versions turn into flags;
- `compilation_config` keys: the fields of `CompilationConfig`.

The extraction is checked against the installed vLLM's real argument parser by the generator.
"""

from __future__ import annotations

import ast
import hashlib
import io
import re
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

INDEX = "https://pypi.org/simple/vllm/"
WANTED = (
    "vllm/envs.py",
    "vllm/engine/arg_utils.py",
    "vllm/entrypoints/openai/cli_args.py",
    "vllm/entrypoints/launchers/cli_args.py",
    "vllm/entrypoints/cli/serve.py",
    "vllm/config/compilation.py",
    "vllm/config.py",
)


class SourceError(RuntimeError):
    pass


@dataclass(frozen=True)
class VllmFacts:
    version: str
    envs: tuple[str, ...]
    flags: tuple[str, ...]
    aliases: dict[str, str]  # short form -> long flag ('-tp' -> '--tensor-parallel-size')
    deprecated: tuple[str, ...]  # flags added with deprecated=True
    compilation_keys: tuple[str, ...]
    cite: str


def _index() -> str:
    with urllib.request.urlopen(INDEX, timeout=60) as response:  # noqa: S310 - the package index
        return response.read().decode()


def sdist_files(version: str, cache: Path) -> dict[str, str]:
    """The WANTED files of vLLM `version`'s sdist (downloaded once into `cache`)."""
    folder = cache / f"vllm-{version}"
    done = folder / ".complete"
    if not done.exists():
        page = _index()
        match = re.search(rf'href="([^"#]*/vllm-{re.escape(version)}\.tar\.gz)#sha256=([0-9a-f]+)"', page)
        if not match:
            raise SourceError(f"vLLM {version}: no sdist on {INDEX}")
        url, digest = match.groups()
        with urllib.request.urlopen(url, timeout=300) as response:  # noqa: S310
            blob = response.read()
        if hashlib.sha256(blob).hexdigest() != digest:
            raise SourceError(f"vLLM {version}: the sdist's sha256 does not match the index")
        folder.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as archive:
            for member in archive.getmembers():
                inner = member.name.split("/", 1)[1] if "/" in member.name else member.name
                if inner in WANTED and member.isfile():
                    data = archive.extractfile(member)
                    if data is not None:
                        target = folder / inner
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(data.read())
        (folder / ".sha256").write_text(digest)
        done.write_text(url)
    return {path: (folder / path).read_text(encoding="utf-8") for path in WANTED if (folder / path).exists()}


def env_names(envs_text: str) -> tuple[str, ...]:
    tree = ast.parse(envs_text)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if getattr(target, "id", None) == "environment_variables" and isinstance(node.value, ast.Dict):
                return tuple(k.value for k in node.value.keys if isinstance(k, ast.Constant))
    raise SourceError("vllm/envs.py: no environment_variables dict")


def _dataclass_fields(tree: ast.Module, class_pattern: str) -> list[str]:
    fields = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and re.fullmatch(class_pattern, node.name):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    name = item.target.id
                    if not name.startswith("_") and "ClassVar" not in ast.unparse(item.annotation):
                        fields.append(name)
    return fields


def flags(files: dict[str, str]) -> tuple[tuple[str, ...], dict[str, str], tuple[str, ...]]:
    """(every flag, short alias -> long flag, flags marked deprecated=True)."""
    found: set[str] = set()
    aliases: dict[str, str] = {}
    deprecated: set[str] = set()
    for path in (
        "vllm/engine/arg_utils.py",
        "vllm/entrypoints/openai/cli_args.py",
        "vllm/entrypoints/launchers/cli_args.py",
        "vllm/entrypoints/cli/serve.py",
    ):
        text = files.get(path)
        if not text:
            continue
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
                names = [
                    a.value
                    for a in node.args
                    if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")
                ]
                found.update(names)
                longs = [n for n in names if n.startswith("--")]
                for name in names:
                    if not name.startswith("--") and longs:
                        aliases[name] = longs[0]
                if any(k.arg == "deprecated" and getattr(k.value, "value", False) is True for k in node.keywords):
                    deprecated.update(longs)
        for field in _dataclass_fields(tree, r"(Base)?FrontendArgs"):
            found.add("--" + field.replace("_", "-"))
        if path == "vllm/engine/arg_utils.py":
            for field in _dataclass_fields(tree, r"EngineArgs"):
                found.add("--" + field.replace("_", "-"))
    return tuple(sorted(found)), dict(sorted(aliases.items())), tuple(sorted(deprecated))


def compilation_keys(files: dict[str, str]) -> tuple[str, ...]:
    for path in ("vllm/config/compilation.py", "vllm/config.py"):
        text = files.get(path)
        if text:
            fields = _dataclass_fields(ast.parse(text), r"CompilationConfig")
            if fields:
                return tuple(sorted(set(fields)))
    return ()


def read_version(version: str, cache: Path) -> VllmFacts:
    files = sdist_files(version, cache)
    if "vllm/envs.py" not in files:
        raise SourceError(f"vLLM {version}: the sdist has no vllm/envs.py")
    all_flags, aliases, deprecated = flags(files)
    return VllmFacts(
        version=version,
        envs=env_names(files["vllm/envs.py"]),
        flags=all_flags,
        aliases=aliases,
        deprecated=deprecated,
        compilation_keys=compilation_keys(files),
        cite=f"pypi:vllm-{version}.tar.gz",
    )
