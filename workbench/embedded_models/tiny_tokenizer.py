"""The tiny model's tokenizer: byte-level BPE trained on the corpus shipped in this package.

Byte-level means every UTF-8 string round-trips (unknown characters fall back to single bytes), the
same scheme as Qwen2 and GPT-2. The vocabulary is small (2,048 ids) so the embedding table stays
tiny; the corpus is mixed prose, dialogue, code and notes so common words and code tokens merge.
Training is deterministic for a given corpus and `tokenizers` version, so two builds give the same
tokenizer.json byte for byte.

Special tokens follow ChatML: `<|endoftext|>` (id 0, padding and document end), `<|im_start|>` (1)
and `<|im_end|>` (2, end of a chat turn and the generation stop token).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.errors import WorkbenchError
from workbench.results.files import write_json

if TYPE_CHECKING:
    from importlib.abc import Traversable

VOCAB_SIZE = 2048
MODEL_MAX_LENGTH = 4096
ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END)

# How text is cut into words before BPE merges, as Qwen2 tokenizers do: English contractions, a letter
# run with at most one leading non-letter (usually the space), each digit on its own, punctuation runs
# with their trailing newlines, newline runs, and other whitespace. transformers 5 rebuilds every
# Qwen2 tokenizer with this split (and NFC) whatever tokenizer.json says, so training must use it too
# or the merges would not match how the served model cuts text.
PRETOKENIZE_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
    r"|[^\r\n\p{L}\p{N}]?\p{L}+"
    r"|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+"
    r"|\s+(?!\S)"
    r"|\s+"
)

# ChatML: each message is "<|im_start|>{role}\n{content}<|im_end|>\n"; the generation prompt opens an
# assistant turn. Written for this project; the format itself is the common ChatML convention.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- endif -%}"
)


@dataclass(frozen=True)
class SpecialTokenIds:
    endoftext: int
    im_start: int
    im_end: int


def corpus_files() -> list[Traversable]:
    """The training text files shipped in `workbench/embedded_models/corpus/`, in name order."""
    folder = resources.files("workbench.embedded_models").joinpath("corpus")
    files = sorted((f for f in folder.iterdir() if f.is_file()), key=lambda f: f.name)
    if not files:
        raise WorkbenchError(
            f"no tokenizer training text in {folder}: the package was installed without its corpus "
            "files; reinstall ascend-porting-workbench from a complete source tree"
        )
    return files


def corpus_texts() -> list[str]:
    return [f.read_text(encoding="utf-8") for f in corpus_files()]


def corpus_sha256() -> str:
    """Hash over the corpus file names and contents: part of the tiny model's cache fingerprint."""
    digest = hashlib.sha256()
    for f in corpus_files():
        digest.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()


def train_tokenizer(texts: list[str]):
    """Train the byte-level BPE on `texts`; returns a `tokenizers.Tokenizer` with VOCAB_SIZE ids."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    if tokenizer.get_vocab_size() != VOCAB_SIZE:
        # min_frequency=2 caps the merges a small corpus yields; the model's vocab_size must match.
        raise WorkbenchError(
            f"the tokenizer corpus yields only {tokenizer.get_vocab_size()} of {VOCAB_SIZE} tokens: "
            "add text to workbench/embedded_models/corpus/"
        )
    return tokenizer


def write_tokenizer(out_dir: Path) -> SpecialTokenIds:
    """Train on the shipped corpus and write tokenizer.json + tokenizer_config.json into `out_dir`."""
    tokenizer = train_tokenizer(corpus_texts())
    tokenizer.save(str(out_dir / "tokenizer.json"), pretty=True)
    ids = SpecialTokenIds(*(tokenizer.token_to_id(t) for t in SPECIAL_TOKENS))
    added = {
        str(token_id): {
            "content": token,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for token, token_id in zip(SPECIAL_TOKENS, (ids.endoftext, ids.im_start, ids.im_end), strict=True)
    }
    write_json(
        out_dir / "tokenizer_config.json",
        {
            "tokenizer_class": "Qwen2Tokenizer",
            "added_tokens_decoder": added,
            "bos_token": None,
            "eos_token": IM_END,
            "pad_token": ENDOFTEXT,
            "unk_token": None,
            "additional_special_tokens": [IM_START, IM_END],
            "add_bos_token": False,
            "add_eos_token": False,
            "clean_up_tokenization_spaces": False,
            "model_max_length": MODEL_MAX_LENGTH,
            "chat_template": CHAT_TEMPLATE,
        },
        indent=2,
        sort_keys=True,
    )
    write_json(
        out_dir / "special_tokens_map.json",
        {"eos_token": IM_END, "pad_token": ENDOFTEXT, "additional_special_tokens": [IM_START, IM_END]},
        indent=2,
        sort_keys=True,
    )
    return ids
