"""What a service runs, read from its deployment: the vLLM version (image tag, the `ARG` behind it, `vllm==`
pins), its models (architectures from `config.json` where the model is a readable directory, else the
name) and the features its engine flags turn on. The release picker starts from these."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from workbench.deploy.model import Container, Origin, ReadResult
from workbench.deploy.policy import repository_of, tag_of

VLLM_IMAGES = ("vllm/vllm-openai",)  # images whose tag is vLLM's own version
_PIN = re.compile(r"(?<![\w-])vllm(?:\[[^\]]*\])?\s*==\s*v?(\d[\w.+-]*)")
_PIN_FILES = re.compile(r"^(requirements.*\.(txt|in)|constraints.*\.txt|pyproject\.toml|Dockerfile.*|Containerfile.*)$")
FEATURE_FLAGS = {
    "--quantization": "quantization",
    "--kv-cache-dtype": "KV-cache dtype",
    "--kv-transfer-config": "KV connector",
    "--speculative-config": "speculative decoding",
    "--enable-lora": "LoRA",
    "--enable-expert-parallel": "expert parallel",
    "--compilation-config": "graph mode",
    "--attention-backend": "attention backend",
}


@dataclass(frozen=True)
class VllmVersion:
    version: Version
    origin: Origin
    how: str  # 'image tag', 'pin'


@dataclass(frozen=True)
class Model:
    name: str
    architecture: str | None
    origin: Origin


def as_version(text: str | None) -> Version | None:
    if not text:
        return None
    try:
        return Version(text.lstrip("vV"))
    except InvalidVersion:
        return None


def vllm_versions(result: ReadResult) -> list[VllmVersion]:
    found: list[VllmVersion] = []
    for container in result.containers:
        image = container.image
        if image is None or repository_of(image.value or "") not in VLLM_IMAGES:
            continue
        version = as_version(tag_of(image.value or ""))
        if version is not None:
            origin = image.resolved_from[-1] if image.resolved_from else image.origin
            found.append(VllmVersion(version, origin, f"image tag of {image.value}"))
    for path in _pin_files(result):
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in _PIN.finditer(text):
            version = as_version(match.group(1))
            if version is not None:
                line = text.count("\n", 0, match.start()) + 1
                found.append(VllmVersion(version, Origin(str(path), line, "pin"), f"pin vllm=={match.group(1)}"))
    return found


def _pin_files(result: ReadResult) -> list[Path]:
    paths = [Path(p) for p, _ in result.read] + [Path(n.path) for n in result.not_read]
    return [p for p in paths if p.is_file() and _PIN_FILES.match(p.name)]


def models(container: Container) -> list[Model]:
    setting = container.flag("model") or container.flag("--model")
    if setting is None or not setting.value:
        return []
    return [Model(setting.value, architecture(setting.value, Path(setting.origin.file).parent), setting.origin)]


def architecture(model: str, near: Path) -> str | None:
    """architectures[0] of the model's config.json when the model is a directory readable here."""
    for candidate in (Path(model), near / model):
        config = candidate / "config.json"
        if config.is_file():
            try:
                archs = json.loads(config.read_text(encoding="utf-8")).get("architectures") or []
            except (OSError, ValueError):
                return None
            return str(archs[0]) if archs else None
    return None


def features(container: Container) -> list[tuple[str, str, Origin]]:
    """(feature, value, origin) of every feature flag the engine sets."""
    found = []
    for setting in container.flags:
        label = FEATURE_FLAGS.get(setting.name)
        if label is not None:
            found.append((label, _feature_value(setting.name, setting.value), setting.origin))
    return found


def _feature_value(flag: str, value: str | None) -> str:
    if value is None:
        return "on"
    if flag in ("--kv-transfer-config", "--speculative-config", "--compilation-config"):
        try:
            data = json.loads(value)
        except ValueError:
            return value
        for key in ("kv_connector", "method", "cudagraph_mode", "mode"):
            if isinstance(data, dict) and key in data:
                return f"{key}={data[key]}"
    return value
