"""vLLM's own settings per version, read from its source distributions on PyPI.

vllm-ascend runs on the vLLM version its release pairs with (recipes/matrices/vllm-ascend.yaml), so a
serving command for v0.11.0 must be judged against vLLM 0.11.0's flags and `VLLM_*` variables, not the
vLLM installed here. vLLM's repository is too large to mirror, but every release's sdist is on PyPI
(about 10 MB); this module downloads the ones the matrix names (sha256-checked against the index),
keeps only the files it reads, and extracts:

- `VLLM_*` variables: the keys of `environment_variables` in `vllm/envs.py`;
- serving flags: every literal `"--flag"` given to `add_argument` in the engine and server argument
  modules, plus the fields of the frontend-argument dataclasses newer versions turn into flags;
- `compilation_config` keys: the fields of `CompilationConfig`;
- what `--quantization` and `--kv-cache-dtype` accept (`QUANTIZATION_METHODS` / `QuantizationMethods`,
  `CacheDType`), the KV connectors `KVConnectorFactory` registers, and the model architectures of the
  registry (which of them are multimodal);
- the other environment variables vLLM's own modules read directly (`os.environ.get("PROMETHEUS_MULTIPROC_DIR")`),
  so a name such as PROMETHEUS_MULTIPROC_DIR is known to be vLLM's although it lacks the `VLLM_` prefix.

The extraction is checked against the installed vLLM's real argument parser by the generator.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
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
    "vllm/config/cache.py",
    "vllm/model_executor/layers/quantization/__init__.py",
    "vllm/distributed/kv_transfer/kv_connector/factory.py",
    "vllm/model_executor/models/registry.py",
)
# The cache's layout: a folder written by another layout is read again from the sdist.
LAYOUT = "2"
ENV_READS_FILE = "env_reads.json"
_ENV_READ = re.compile(
    r"""os\.(?:environ\.get|getenv|environ\.setdefault)\(\s*["']([A-Z][A-Z0-9_]+)["']|os\.environ\[\s*["']([A-Z][A-Z0-9_]+)["']\s*\]"""
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
    quantization_methods: tuple[str, ...] = ()
    kv_cache_dtypes: tuple[str, ...] = ()
    kv_connectors: tuple[str, ...] = ()
    architectures: tuple[str, ...] = ()
    multimodal_architectures: tuple[str, ...] = ()
    env_reads: dict[str, str] | None = None  # other variables vLLM's modules read -> 'path:line'


def _index() -> str:
    with urllib.request.urlopen(INDEX, timeout=60) as response:  # noqa: S310 - the package index
        return response.read().decode()


def sdist_files(version: str, cache: Path) -> dict[str, str]:
    """The WANTED files of vLLM `version`'s sdist (downloaded once into `cache`), and ENV_READS_FILE."""
    folder = cache / f"vllm-{version}"
    done = folder / ".complete"
    layout = folder / ".layout"
    if not done.exists() or not layout.exists() or layout.read_text().strip() != LAYOUT:
        _download(version, folder)
        layout.write_text(LAYOUT)
    files = {path: (folder / path).read_text(encoding="utf-8") for path in WANTED if (folder / path).exists()}
    reads = folder / ENV_READS_FILE
    if reads.exists():
        files[ENV_READS_FILE] = reads.read_text(encoding="utf-8")
    return files


def _download(version: str, folder: Path) -> None:
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
    reads: dict[str, str] = {}
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as archive:
        for member in archive.getmembers():
            inner = member.name.split("/", 1)[1] if "/" in member.name else member.name
            if not member.isfile() or not inner.endswith(".py"):
                continue
            data = archive.extractfile(member)
            text = data.read().decode("utf-8", errors="replace") if data is not None else ""
            if inner in WANTED:
                target = folder / inner
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            if inner.startswith("vllm/") and inner not in ("vllm/envs.py", "vllm/collect_env.py"):
                for number, line in enumerate(text.splitlines(), 1):
                    for found in _ENV_READ.finditer(line):
                        reads.setdefault(found.group(1) or found.group(2), f"{inner}:{number}")
    (folder / ENV_READS_FILE).write_text(json.dumps(dict(sorted(reads.items())), indent=0), encoding="utf-8")
    (folder / ".sha256").write_text(digest)
    (folder / ".complete").write_text(url)


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


def _string_constants(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _assigned(tree: ast.Module, names: tuple[str, ...]) -> ast.AST | None:
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(getattr(t, "id", None) in names for t in targets) and getattr(node, "value", None) is not None:
            return node.value
    return None


def quantization_methods(files: dict[str, str]) -> tuple[str, ...]:
    """What `--quantization` accepts: the `QuantizationMethods` Literal, else the QUANTIZATION_METHODS list."""
    text = files.get("vllm/model_executor/layers/quantization/__init__.py")
    if not text:
        return ()
    value = _assigned(ast.parse(text), ("QuantizationMethods", "QUANTIZATION_METHODS"))
    return tuple(sorted(set(_string_constants(value)))) if value is not None else ()


def kv_cache_dtypes(files: dict[str, str]) -> tuple[str, ...]:
    for path in ("vllm/config/cache.py", "vllm/config.py"):
        text = files.get(path)
        value = _assigned(ast.parse(text), ("CacheDType",)) if text else None
        if value is not None:
            return tuple(_string_constants(value))
    return ()


def kv_connectors(files: dict[str, str]) -> tuple[str, ...]:
    text = files.get("vllm/distributed/kv_transfer/kv_connector/factory.py")
    if not text:
        return ()
    names = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "register_connector" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.append(first.value)
    return tuple(sorted(set(names)))


def architectures(files: dict[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(every architecture of the registry, the multimodal ones)."""
    text = files.get("vllm/model_executor/models/registry.py")
    if not text:
        return (), ()
    every, multimodal = set(), set()
    for node in ast.parse(text).body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        name = next((t.id for t in targets if isinstance(t, ast.Name)), "")
        if re.fullmatch(r"_\w*MODELS", name) and isinstance(getattr(node, "value", None), ast.Dict):
            keys = {k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            every |= keys
            if "MULTIMODAL" in name:
                multimodal |= keys
    return tuple(sorted(every)), tuple(sorted(multimodal))


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
        quantization_methods=quantization_methods(files),
        kv_cache_dtypes=kv_cache_dtypes(files),
        kv_connectors=kv_connectors(files),
        architectures=architectures(files)[0],
        multimodal_architectures=architectures(files)[1],
        env_reads=json.loads(files.get(ENV_READS_FILE, "{}")),
    )
