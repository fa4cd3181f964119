"""What one vllm-ascend tag accepts, read from its source: quantization methods, KV connectors, models.

- quantization: the platform's `supported_quantization` list (`NPUPlatform` in vllm_ascend/platform.py),
  its constants resolved (`ASCEND_QUANTIZATION_METHOD = "ascend"` wherever the package defines it); vLLM's
  `verify_quantization` refuses any other method at start-up ("... quantization is currently not supported
  in npu"); and whether the platform adds its 'ascend' method to `--quantization`'s parser choices
  (`quant_action.choices.append(...)`), without which vLLM's parser refuses `--quantization ascend`;
- KV connectors: every `KVConnectorFactory.register_connector("Name", ...)` of the package;
- model architectures: every `ModelRegistry.register_model("Arch", ...)` of the package (the ones
  vllm-ascend serves with its own implementation).

Each comes with the TAG:path:line it was read at, so the table's spans cite the source.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from mirror import Mirror

PLATFORM = "vllm_ascend/platform.py"


def _constants(mirror: Mirror, tag: str) -> dict[str, str]:
    """Module-level NAME = "text" assignments of the package whose names end in _METHOD (quantization names)."""
    found: dict[str, str] = {}
    for path, _line, _text in mirror.grep(tag, r"^[A-Z0-9_]*METHOD\s*=\s*['\"]", "vllm_ascend"):
        text = mirror.show(tag, path) or ""
        for match in re.finditer(r"^([A-Z0-9_]*METHOD)\s*=\s*['\"]([\w-]+)['\"]", text, re.M):
            found.setdefault(match.group(1), match.group(2))
    return found


def _supported_quantization(mirror: Mirror, tag: str) -> dict[str, Any] | None:
    text = mirror.show(tag, PLATFORM) or ""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    constants = _constants(mirror, tag)
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(getattr(t, "id", None) == "supported_quantization" for t in targets) and node.value is not None:
                methods = []
                for item in getattr(node.value, "elts", []):
                    if isinstance(item, ast.Constant) and isinstance(item.value, str):
                        methods.append(item.value)
                    elif isinstance(item, ast.Name) and item.id in constants:
                        methods.append(constants[item.id])
                return {"methods": methods, "cite": f"{tag}:{PLATFORM}:{node.lineno}"}
    return None


def _choice_added(mirror: Mirror, tag: str) -> dict[str, Any] | None:
    for path, line, _text in mirror.grep(tag, r"quant_action\.choices\.append", PLATFORM):
        return {"added": True, "cite": f"{tag}:{path}:{line}"}
    return None


def _registered(mirror: Mirror, tag: str, call: str) -> dict[str, Any] | None:
    """Names registered with `call("Name", ...)` anywhere in the package, with the first one's place."""
    names, cite = [], ""
    for path, line, _text in mirror.grep(tag, re.escape(call) + r"\(", "vllm_ascend"):
        text = mirror.show(tag, path) or ""
        for match in re.finditer(re.escape(call) + r"\(\s*['\"]([\w.-]+)['\"]", text):
            names.append(match.group(1))
        cite = cite or f"{tag}:{path}:{line}"
    return {"names": sorted(set(names)), "cite": cite} if names else None


def read_capabilities(mirror: Mirror, tag: str) -> dict[str, dict[str, Any]]:
    """capability -> facts at `tag` (each with its cite); a capability the tag does not have is absent."""
    found = {
        "quantization": _supported_quantization(mirror, tag),
        "quantization_choice": _choice_added(mirror, tag),
        "kv_connectors": _registered(mirror, tag, "KVConnectorFactory.register_connector"),
        "architectures": _registered(mirror, tag, "ModelRegistry.register_model"),
    }
    return {name: facts for name, facts in found.items() if facts is not None}
