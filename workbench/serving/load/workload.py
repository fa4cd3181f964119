"""What to send: a workload (lengths, count or duration, arrival mode, SLOs) and its prompts.

docs/METHOD.md §10: measure at fixed, realistic prompt and output lengths. Prompts have an exact token
count, built with the model's own tokenizer (from words that survive decode -> encode as exactly one
token); outputs have a fixed length (`max_tokens` + `ignore_eos`). A shared prefix (`prefix_ratio`)
exercises prefix caching.
"""

from __future__ import annotations

import contextlib
import math
import re
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from workbench.embedded_models.transformers_lock import TRANSFORMERS_IMPORT, auto_tokenizer
from workbench.errors import WorkbenchError

_WORD_TOKEN = re.compile(r"^ [a-z]{2,}$")  # " apple": survives decode -> encode as exactly one token


@dataclass(frozen=True)
class SLO:
    """Service-level objectives for goodput, in milliseconds (None = not part of the objective)."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2el_ms: float | None = None

    @property
    def active(self) -> bool:
        return any(v is not None for v in (self.ttft_ms, self.tpot_ms, self.e2el_ms))


def workload_problems(
    input_lens: Sequence[int],
    output_lens: Sequence[int],
    concurrencies: Sequence[int] = (),
    request_rates: Sequence[float] = (),
    prefix_ratios: Sequence[float] = (0.0,),
    burstiness: float = 1.0,
) -> list[str]:
    """The bounds every workload obeys, for one load run or a sweep's lists of values alike."""
    problems = []
    if any(v < 1 for v in (*input_lens, *output_lens)):
        problems.append(f"input_len and output_len must be >= 1, got {list(input_lens)}, {list(output_lens)}")
    if any(c < 1 for c in concurrencies):
        problems.append(f"concurrency must be >= 1, got {list(concurrencies)}")
    if any(r <= 0 for r in request_rates) or burstiness <= 0:
        problems.append("request_rate and burstiness must be > 0")
    if any(not 0.0 <= r < 1.0 for r in prefix_ratios):
        problems.append(f"prefix_ratio must be in [0, 1), got {list(prefix_ratios)}")
    return problems


@dataclass(frozen=True)
class Workload:
    """One load run's shape. Exactly one of num_prompts / duration_s; concurrency and/or request_rate."""

    input_len: int
    output_len: int
    num_prompts: int | None = None
    duration_s: float | None = None
    concurrency: int | None = None
    request_rate: float = math.inf
    burstiness: float = 1.0
    prefix_ratio: float = 0.0
    seed: int = 0
    slo: SLO = field(default_factory=SLO)
    temperature: float = 0.0
    request_timeout_s: float = 600.0
    trace_speed: float | None = None  # a trace's requests at their own times, this many times faster

    def __post_init__(self) -> None:
        problems = workload_problems(
            (self.input_len,),
            (self.output_len,),
            () if self.concurrency is None else (self.concurrency,),
            (self.request_rate,),
            (self.prefix_ratio,),
            self.burstiness,
        )
        if (self.num_prompts is None) == (self.duration_s is None):
            problems.append("give exactly one of num_prompts (--num-prompts) or duration_s (--duration)")
        if self.num_prompts is not None and self.num_prompts < 1:
            problems.append(f"num_prompts must be >= 1, got {self.num_prompts}")
        if self.duration_s is not None and self.duration_s <= 0:
            problems.append(f"duration_s must be > 0, got {self.duration_s}")
        if self.trace_speed is not None and not self.trace_speed > 0:
            problems.append(f"trace speed must be > 0, got {self.trace_speed}")
        if self.concurrency is None and math.isinf(self.request_rate) and self.trace_speed is None:
            problems.append("give concurrency (--concurrency) or a finite request_rate (--request-rate)")
        if problems:
            raise WorkbenchError("load workload: " + "; ".join(problems))

    @property
    def mode(self) -> str:
        if self.trace_speed is not None:
            return f"trace x{self.trace_speed:g}"
        return f"concurrency={self.concurrency}" if math.isinf(self.request_rate) else f"rate={self.request_rate}/s"


@dataclass(frozen=True)
class Prompt:
    """What one request sends: a prompt of `num_tokens` tokens, or (a trace's request) its whole recorded body,
    sent to `path` at `offset_s` from the run's start (`workbench.serving.load.trace.trace_prompts`)."""

    text: str
    num_tokens: int  # as the server will count it, special tokens included
    body: dict[str, Any] | None = None
    path: str = "/v1/completions"
    offset_s: float | None = None


def word_token_ids(tokenizer: Any, wanted: int, rng: np.random.Generator) -> np.ndarray:
    """Token ids that decode to ' word' and re-encode to themselves, so prompts round-trip exactly."""
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    found: list[int] = []
    for token_id in rng.permutation(len(tokenizer)):
        token_id = int(token_id)
        if token_id in special:
            continue
        piece = tokenizer.decode([token_id])
        if _WORD_TOKEN.match(piece) and tokenizer.encode(piece, add_special_tokens=False) == [token_id]:
            found.append(token_id)
            if len(found) >= wanted:
                break
    if len(found) < 16:
        raise WorkbenchError(
            f"tokenizer {getattr(tokenizer, 'name_or_path', '?')}: found only {len(found)} plain-word tokens; "
            "exact-length prompts need a byte-level BPE or SentencePiece vocabulary with ' word' tokens"
        )
    return np.array(found)


def build_prompts(
    tokenizer: Any, count: int, input_len: int, *, prefix_ratio: float = 0.0, seed: int = 0
) -> list[Prompt]:
    """`count` prompts of exactly `input_len` tokens as the server counts them (special tokens included).

    The first round(prefix_ratio * content) tokens are shared by every prompt, to exercise prefix
    caching. Each prompt is a sequence of ' word' tokens; its length is checked by re-encoding.
    """
    specials = tokenizer.num_special_tokens_to_add() if hasattr(tokenizer, "num_special_tokens_to_add") else 0
    content = input_len - specials
    if content < 1:
        raise WorkbenchError(
            f"input_len {input_len} leaves no room after {specials} special token(s); use a larger --input-len"
        )
    rng = np.random.default_rng(seed)
    words = word_token_ids(tokenizer, 4096, rng)
    prefix = rng.choice(words, size=int(round(prefix_ratio * content)))
    prompts = []
    for _ in range(count):
        ids = np.concatenate([prefix, rng.choice(words, size=content - len(prefix))])
        text = tokenizer.decode(ids.tolist())
        counted = len(tokenizer.encode(text, add_special_tokens=True))
        if counted != input_len:
            raise WorkbenchError(
                f"built a prompt of {counted} tokens instead of {input_len}: this tokenizer merges across "
                "word boundaries; pass a different --seed or report the tokenizer"
            )
        prompts.append(Prompt(text, counted))
    return prompts


def _import_quietly() -> None:
    with contextlib.suppress(Exception):  # load_tokenizer imports again and raises what went wrong
        auto_tokenizer()


def import_tokenizer_library_in_background() -> None:
    """Start importing transformers' AutoTokenizer in a daemon thread and return at once.

    The first import in a process takes ~10 s of CPU here (transformers pulls in torch, and
    scikit-learn when it is installed). A sweep needs the tokenizer only once its server is up, so
    it starts this before the server and the import overlaps the start instead of following it;
    `load_tokenizer` then waits for it under the same lock. A no-op once transformers is imported.
    """
    if "transformers.models.auto.tokenization_auto" not in sys.modules:
        threading.Thread(target=_import_quietly, name="workbench-import-transformers", daemon=True).start()


def load_tokenizer(model_dir: str | Path) -> Any:
    """The model's own tokenizer (transformers.AutoTokenizer on the local model directory)."""
    path = Path(model_dir)
    if not (path / "tokenizer_config.json").exists() and not (path / "tokenizer.json").exists():
        raise WorkbenchError(
            f"no tokenizer files in {path}: exact-length prompts need the model's tokenizer; pass --tokenizer DIR "
            "(a local Hugging Face model directory)"
        )
    with TRANSFORMERS_IMPORT:  # from_pretrained imports the tokenizer's class lazily too
        return auto_tokenizer().from_pretrained(str(path))
