"""Which model a serving command serves: what model-dependent rules need to know (docs/METHOD.md §2, §7).

vllm-ascend refuses or breaks some settings only for some models: torchair graph mode outside its model
list, flash comm v1 for vision-language models, FULL_DECODE_ONLY graphs for some Qwen-VL releases. So the
lint must know the model when it can, in this order:

1. `--model-type` given to the lint (a Hugging Face `model_type` such as `qwen2_5_vl`, or an architecture
   such as `Qwen2_5_VLForConditionalGeneration`);
2. the checkpoint's own `config.json` when the model path in the command is a readable directory
   (`model_type`, `architectures`, and whether it has a vision or audio tower);
3. the words of the model path's last part and of `--served-model-name` (`Qwen2.5-VL-7B-Instruct`).

Names are matched as lowercase words with `.`, `-` and `_` treated alike, so `Qwen2.5-VL` matches the list
entry `qwen2_5_vl`. A model named by nothing the lint recognises stays unknown, and a model-dependent rule
then says so instead of guessing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Families whose names checkpoints carry; a name with one of them is "known" enough to judge a model list.
MODEL_FAMILIES = (
    "qwen",
    "llama",
    "deepseek",
    "glm",
    "mistral",
    "mixtral",
    "gemma",
    "phi",
    "pangu",
    "kimi",
    "minimax",
    "internlm",
    "baichuan",
    "yi",
    "hunyuan",
    "ernie",
    "gpt_oss",
    "bge",
)
# Words that mark a multimodal checkpoint in a model type or architecture ("qwen2_5_vl",
# "Qwen3VLForConditionalGeneration", "qwen3_omni_moe"); config.json's towers decide when it is readable.
MULTIMODAL_WORDS = ("vl", "vision", "omni", "audio", "mllama", "llava", "internvl", "minicpmv")
_TOWERS = ("vision_config", "audio_config", "visual", "vision_tower")


def normalise(text: str) -> str:
    """'Qwen2.5-VL-7B' -> 'qwen2_5_vl_7b': one spelling for names, types and list entries."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


@dataclass(frozen=True)
class ModelIdentity:
    """What the lint knows of the served model, and from where."""

    model_type: str | None  # config.json's model_type, or --model-type
    architectures: tuple[str, ...]
    names: tuple[str, ...]  # normalised names: model type, architectures, path part, served name
    multimodal: bool | None  # None: cannot tell
    basis: str  # 'config.json at /m', '--model-type qwen2_5_vl', 'the model name Qwen2.5-7B', 'nothing'

    @property
    def known(self) -> bool:
        """Whether a family can be read at all (else a model list is not judged, only pointed at)."""
        if self.model_type or self.architectures:
            return True
        return any(family in name for name in self.names for family in MODEL_FAMILIES)

    def matches(self, entries: tuple[str, ...] | list[str]) -> bool:
        """Whether one of the list's entries names this model ('deepseek' matches 'deepseek_v3')."""
        wanted = [normalise(str(entry)) for entry in entries]
        return any(entry and entry in name for entry in wanted for name in self.names)

    def describe(self) -> str:
        return self.model_type or (self.architectures[0] if self.architectures else "") or self.basis


def _config(path: Path) -> dict[str, Any] | None:
    """The checkpoint's config.json, or None when the path is not a readable checkpoint directory."""
    try:
        return json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _multimodal_by_name(names: tuple[str, ...]) -> bool | None:
    words = {word for name in names for word in name.split("_")}
    if words & set(MULTIMODAL_WORDS) or any(w.endswith("vl") and len(w) <= 6 for w in words):
        return True
    return None


def identify(model: str | None, served_name: str | None = None, model_type: str | None = None) -> ModelIdentity:
    """The identity of the served model from the lint's `--model-type`, config.json, or its names."""
    names = tuple(normalise(n) for n in (model.rstrip("/").rsplit("/", 1)[-1] if model else "", served_name or "") if n)
    if model_type:
        is_arch = model_type[:1].isupper() and "For" in model_type
        arch = (model_type,) if is_arch else ()
        given = None if is_arch else model_type
        all_names = (normalise(model_type), *names)
        return ModelIdentity(given, arch, all_names, _multimodal_by_name(all_names), f"--model-type {model_type}")
    config = _config(Path(model).expanduser()) if model else None
    if config is not None:
        found_type = str(config.get("model_type") or "") or None
        archs = tuple(str(a) for a in config.get("architectures") or ())
        all_names = tuple(normalise(n) for n in (found_type or "", *archs) if n) + names
        towers = any(key in config for key in _TOWERS)
        return ModelIdentity(found_type, archs, all_names, towers or None, f"config.json at {model}")
    basis = f"the model name {model}" if model else "nothing (no model in the command)"
    if served_name:
        basis += f" and the served name {served_name}"
    return ModelIdentity(None, (), names, _multimodal_by_name(names), basis)
