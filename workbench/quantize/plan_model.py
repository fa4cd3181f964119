"""One float model in the backend's executor whose linears take any scheme, unit by unit, and score text.

The autopilot's executor side: the sensitivity proxies, the oracle and the executor-measured searches
all ask "what does the model do when these units run this scheme". Loading a checkpoint per question
would cost seconds each; instead the float model is loaded once (float32, the reference numerics) and
`apply(plan)` swaps each linear for its scheme's module (built once, then cached):

    W8A8, W8A8_DYNAMIC   the executor's integer path (`ascend_backend.models.quantized`)   Measured.EXECUTOR
    W8A16, W4A16, W4A8   `fakequant.FakeQuantLinear`                                        Measured.FAKE_QUANT

Scales are rounded through the checkpoint's dtype (bf16) as the writers round them, so the executor runs
the numbers a written checkpoint would hold. Scoring is a prefill of whole texts (PrefillNoCache, many
texts per step) on the paged-attention ops; `prefill(..., start_layer=L, hidden=h)` resumes from a layer's
cached input, so a question about one unit in layer L recomputes only layers L and up.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ascend_backend.attention import build_attention_metadata
from ascend_backend.attention.layout import allocate_kv_cache
from ascend_backend.models import CausalLM, load_model
from ascend_backend.models.quantized import quantized_module
from ascend_backend.models.rope import model_cos_sin_cache
from ascend_backend.quantization import (
    ActivationRange,
    QuantType,
    linear_prefixes,
    observe_linear_inputs,
    quantize_linear,
)
from ascend_backend.quantization.fakequant import FakeQuantLinear, Measured
from ascend_backend.quantization.scheme import PlanScheme
from ascend_backend.quantization.units import RollbackUnit, rollback_units, unit_of
from workbench.errors import WorkbenchError
from workbench.stack.model_hashes import model_hashes

CHECKPOINT_DTYPE = torch.bfloat16  # scales are made exact in the dtype the written checkpoint holds
BLOCK_SIZE = 32
DEFAULT_GROUP_SIZE = 32  # divides SmolLM2's 576 / 1536 and tiny's 256 / 768 inputs


def measured_by(scheme: PlanScheme) -> Measured:
    """How the executor's number for `scheme` is obtained (see `ascend_backend.quantization.fakequant`)."""
    if scheme in (PlanScheme.W8A8, PlanScheme.W8A8_DYNAMIC, PlanScheme.FLOAT):
        return Measured.EXECUTOR
    return Measured.FAKE_QUANT


@dataclass(frozen=True)
class ScoredText:
    """One text to score: token ids, and the first position whose token counts (the reference's start)."""

    id: str
    ids: tuple[int, ...]
    start: int  # 1 <= start < len(ids); tokens ids[start:] are scored

    @property
    def scored(self) -> int:
        return len(self.ids) - self.start


@dataclass(frozen=True)
class TextLoss:
    """Negative log-likelihood of one text's scored tokens (natural log)."""

    id: str
    nll_sum: float
    n_tokens: int


class PlanModel:
    """A float checkpoint in the executor with swappable linears (see the module docstring)."""

    def __init__(
        self,
        model_dir: Path,
        ranges: Mapping[str, ActivationRange] | None = None,
        *,
        group_size: int = DEFAULT_GROUP_SIZE,
        max_batch_tokens: int = 2048,
    ) -> None:
        self.model_dir = Path(model_dir)
        self.model: CausalLM = load_model(model_dir, "cpu", torch.float32)
        hashes = model_hashes(self.model_dir)
        self.identity = f"{hashes.config_sha256}:{hashes.weights_sha256}"  # what the model is, by content
        self.config = self.model.config
        names = [name for name, _ in self.model.named_parameters()]
        self.prefixes = linear_prefixes(names)
        self.units: list[RollbackUnit] = rollback_units(self.prefixes)
        self._unit_of = unit_of(self.units)
        self._float = {p: self.model.get_submodule(p) for p in self.prefixes}
        self._built: dict[tuple[str, PlanScheme], nn.Module] = {}
        self._current: dict[str, PlanScheme] = dict.fromkeys(self.prefixes, PlanScheme.FLOAT)
        self.ranges = dict(ranges or {})
        self.group_size = group_size
        self.max_batch_tokens = max_batch_tokens
        self.cos_sin_cache = model_cos_sin_cache(self.config)
        blocks = max_batch_tokens // BLOCK_SIZE + 64
        c = self.config
        self.kv_caches = [
            allocate_kv_cache(blocks, BLOCK_SIZE, c.num_kv_heads, c.head_size, dtype=torch.float32)
            for _ in range(c.num_layers)
        ]

    # ------------------------------------------------------------------ plans
    def apply(self, plan: Mapping[str, PlanScheme]) -> None:
        """Set every linear's scheme: `plan` by module prefix; prefixes it leaves out run FLOAT."""
        unknown = sorted(set(plan) - set(self.prefixes))
        if unknown:
            raise WorkbenchError(f"plan names {unknown[0]!r}, which is not a linear of this model")
        for prefix in self.prefixes:
            scheme = plan.get(prefix, PlanScheme.FLOAT)
            if self._current[prefix] is scheme:
                continue
            parent, _, leaf = prefix.rpartition(".")
            setattr(self.model.get_submodule(parent), leaf, self.module(prefix, scheme))
            self._current[prefix] = scheme

    def apply_units(self, plan: Mapping[str, PlanScheme]) -> None:
        """Set schemes by unit name (`model.layers.3.down`); units left out run FLOAT."""
        by_name = {unit.name: unit for unit in self.units}
        self.apply({member: scheme for name, scheme in plan.items() for member in by_name[name].members})

    def float_module(self, prefix: str) -> nn.Module:
        return self._float[prefix]

    def module(self, prefix: str, scheme: PlanScheme) -> nn.Module:
        """`prefix`'s module under `scheme` (built on first use, then cached)."""
        if scheme is PlanScheme.FLOAT:
            return self._float[prefix]
        key = (prefix, scheme)
        if key not in self._built:
            self._built[key] = self._build(prefix, scheme)
        return self._built[key]

    def _build(self, prefix: str, scheme: PlanScheme) -> nn.Module:
        layer = self._float[prefix]
        weight, bias = layer.weight.detach(), None if layer.bias is None else layer.bias.detach()
        if scheme in (PlanScheme.W8A16, PlanScheme.W4A16, PlanScheme.W4A8_DYNAMIC):
            group = None if scheme is PlanScheme.W8A16 else self.group_size
            return FakeQuantLinear(
                weight,
                bias,
                scheme.weight_bits or 8,
                group,
                scale_dtype=CHECKPOINT_DTYPE,
                int8_inputs=scheme is PlanScheme.W4A8_DYNAMIC,
            )
        activation = self.unit_range(prefix) if scheme is PlanScheme.W8A8 else None
        quant_type = QuantType.W8A8 if scheme is PlanScheme.W8A8 else QuantType.W8A8_DYNAMIC
        quantized = quantize_linear(weight, bias, quant_type, CHECKPOINT_DTYPE, activation)
        return quantized_module(quantized, torch.float32, "cpu")

    def calibrate(self, texts: Sequence[ScoredText]) -> dict[str, ActivationRange]:
        """Observe every linear's input range over `texts` on the float model (static W8A8's scales); the
        ranges are kept for the W8A8 modules built afterwards, and returned."""
        self.apply({})
        self._built = {key: module for key, module in self._built.items() if key[1] is not PlanScheme.W8A8}
        with observe_linear_inputs(self.model, self.prefixes) as observers:
            for batch in self.batches(texts):
                self.prefill(batch)
        self.ranges = {name: observer.result() for name, observer in observers.items()}
        return self.ranges

    def unit_range(self, prefix: str) -> ActivationRange:
        """The calibrated input range of `prefix`'s unit (the union over its members: one input scale)."""
        members = [self.ranges[m] for m in self._unit_of[prefix].members if m in self.ranges]
        if not members:
            raise WorkbenchError(f"static W8A8 for {prefix} needs its calibrated input range; calibrate first")
        return ActivationRange(
            min(r.minimum for r in members), max(r.maximum for r in members), sum(r.tokens for r in members)
        )

    # ------------------------------------------------------------------ scoring
    def batches(self, texts: Sequence[ScoredText]) -> list[list[ScoredText]]:
        """Texts packed in order into prefill steps of at most max_batch_tokens (a longer text is refused)."""
        batches: list[list[ScoredText]] = [[]]
        used = 0
        for text in texts:
            if len(text.ids) > self.max_batch_tokens:
                raise WorkbenchError(
                    f"text {text.id} has {len(text.ids)} tokens, more than max_batch_tokens {self.max_batch_tokens}"
                )
            if used + len(text.ids) > self.max_batch_tokens and batches[-1]:
                batches.append([])
                used = 0
            batches[-1].append(text)
            used += len(text.ids)
        return [b for b in batches if b]

    @torch.inference_mode()
    def prefill(
        self,
        batch: Sequence[ScoredText],
        *,
        start_layer: int = 0,
        hidden: torch.Tensor | None = None,
        capture: bool = False,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Run `batch` as one prompt-only step; returns (final-norm hidden [T, hidden], layer inputs).

        With `start_layer` > 0, `hidden` is that layer's input for this batch (from an earlier capture) and
        the layers below are skipped. `capture` returns the input of every layer run (for later resumes).
        """
        lens = [len(t.ids) for t in batch]
        tables, first = [], 1  # block 0 stays unused, the allocator's convention
        for n in lens:
            count = -(-n // BLOCK_SIZE)
            tables.append(list(range(first, first + count)))
            first += count
        metadata = build_attention_metadata(
            tables, seq_lens=lens, query_lens=lens, block_size=BLOCK_SIZE, chunked_prefill=False
        )
        positions = torch.cat([torch.arange(n) for n in lens])
        if hidden is None:
            if start_layer:
                raise ValueError("start_layer > 0 needs the hidden state entering that layer")
            hidden = self.model.model.embed_tokens(torch.tensor([i for t in batch for i in t.ids]))
        inputs = []
        layers = self.model.model.layers
        for index in range(start_layer, len(layers)):
            if capture:
                inputs.append(hidden)
            hidden = layers[index](hidden, positions, self.cos_sin_cache, self.kv_caches[index], metadata)
        return self.model.model.norm(hidden), inputs

    @torch.inference_mode()
    def scored_logprobs(self, batch: Sequence[ScoredText], final: torch.Tensor) -> Iterator[torch.Tensor]:
        """Per text, [scored, vocab] float32 log-probabilities predicting each scored token."""
        offset = 0
        for text in batch:
            rows = torch.arange(offset + text.start - 1, offset + len(text.ids) - 1)
            yield torch.log_softmax(self.model.lm_head(final.index_select(0, rows)).float(), dim=-1)
            offset += len(text.ids)

    def losses(self, batch: Sequence[ScoredText], final: torch.Tensor) -> list[TextLoss]:
        out = []
        for text, logprobs in zip(batch, self.scored_logprobs(batch, final)):
            targets = torch.tensor(text.ids[text.start :])
            picked = logprobs.gather(1, targets[:, None]).double()
            out.append(TextLoss(text.id, float(-picked.sum()), text.scored))
        return out

    def score(self, texts: Sequence[ScoredText]) -> list[TextLoss]:
        """NLL of every text's scored tokens under the current plan."""
        return [loss for batch in self.batches(texts) for loss in self.losses(batch, self.prefill(batch)[0])]
