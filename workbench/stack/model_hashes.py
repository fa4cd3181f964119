"""Content hashes of a model directory: config, tokenizer and weights, without re-reading big files.

A result is only comparable with another of the same model, so the fingerprint carries what the model
*is*, not just its name: a re-quantized or re-converted checkpoint in the same directory must show up
as a change (docs/METHOD.md §16). Hashing is by content (streamed sha256), but a checkpoint of tens of
GB must not be read again for every bench result, so each file's digest is kept in a small cache keyed
by (resolved path, size, mtime): a file that was rewritten gets a new mtime and is hashed again.

    <cache>/hashes/files.json   {"/abs/path/model.safetensors": {"size": ..., "mtime_ns": ..., "sha256": ...}}

The cache is written atomically under a lock; losing it only costs a re-hash.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench import settings
from workbench.results.files import exclusive_lock, write_json

CHUNK = 8 << 20  # 8 MiB reads: large enough for throughput, small enough for memory
PROGRESS_FROM_BYTES = 256 << 20  # show a progress bar when this much must actually be read
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".npz")
TOKENIZER_FILES = frozenset(
    {
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "added_tokens.json",
        "vocab.json",
        "merges.txt",
        "tokenizer.model",
        "chat_template.jinja",
        "chat_template.json",
    }
)
NOT_MODEL_FILES = frozenset({"provenance.json"})  # written by our model cache; holds build timestamps


def cache_file() -> Path:
    return settings.cache_dir() / "hashes" / "files.json"


def _load_cache(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_cache(path: Path, data: dict[str, dict[str, Any]]) -> None:
    write_json(path, data, indent=0, sort_keys=True)


def _stream_sha256(path: Path, bar: Any) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
            bar.update(len(block))
    return digest.hexdigest()


def file_digests(paths: list[Path], *, cache: Path | None = None) -> dict[Path, str]:
    """sha256 of each file, from the cache when (path, size, mtime) match, else read and remembered."""
    from tqdm.auto import tqdm

    cache = cache or cache_file()
    stats = {p: p.stat() for p in paths}
    with exclusive_lock(cache.with_suffix(".lock")):
        known = _load_cache(cache)
        todo = [
            p
            for p in paths
            if (entry := known.get(str(p.resolve()))) is None
            or (entry.get("size"), entry.get("mtime_ns")) != (stats[p].st_size, stats[p].st_mtime_ns)
        ]
        total = sum(stats[p].st_size for p in todo)
        with tqdm(
            total=total, unit="B", unit_scale=True, desc="hashing weights", disable=total < PROGRESS_FROM_BYTES
        ) as bar:
            for path in todo:
                known[str(path.resolve())] = {
                    "size": stats[path].st_size,
                    "mtime_ns": stats[path].st_mtime_ns,
                    "sha256": _stream_sha256(path, bar),
                }
        if todo:
            _save_cache(cache, known)
    return {p: known[str(p.resolve())]["sha256"] for p in paths}


def _combined(digests: dict[Path, str]) -> str | None:
    """One digest over (file name, file digest) pairs in name order; None when there are no files."""
    if not digests:
        return None
    text = "".join(f"{p.name} {d}\n" for p, d in sorted(digests.items(), key=lambda item: item[0].name))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class ModelHashes:
    """What a model directory holds, by content. Digests are sha256 hex; None = no such files."""

    path: str
    config_sha256: str | None  # every top-level *.json that is not a tokenizer file (config, generation, quant)
    tokenizer_sha256: str | None
    weights_sha256: str | None
    weight_files: int
    weights_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def model_hashes(directory: Path, *, cache: Path | None = None) -> ModelHashes:
    """Config, tokenizer and weight digests of a Hugging Face style model directory (top level only)."""
    directory = Path(directory)
    files = sorted(p for p in directory.iterdir() if p.is_file() and p.name not in NOT_MODEL_FILES)
    weights = [p for p in files if p.suffix in WEIGHT_SUFFIXES]
    tokenizer = [p for p in files if p.name in TOKENIZER_FILES]
    config = [p for p in files if p.suffix == ".json" and p.name not in TOKENIZER_FILES]
    small = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (*config, *tokenizer)}
    return ModelHashes(
        path=str(directory.resolve()),
        config_sha256=_combined({p: small[p] for p in config}),
        tokenizer_sha256=_combined({p: small[p] for p in tokenizer}),
        weights_sha256=_combined(file_digests(weights, cache=cache)),
        weight_files=len(weights),
        weights_bytes=sum(p.stat().st_size for p in weights),
    )
