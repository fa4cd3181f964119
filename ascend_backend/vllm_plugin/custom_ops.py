"""Out-of-tree overrides of vLLM's custom-op layers, each routed through `ascend_backend.registry`.

vLLM swaps a layer class at construction: `CustomOp.__new__` looks up the class *name* (`RMSNorm`,
`SiluAndMul`, ...) in `op_registry_oot` and instantiates whatever class is stored there. Each override
below subclasses vLLM's layer (so its `__init__`, weights and buffers are untouched) and replaces the
three forwards vLLM can pick:

- `forward_native`: used when the custom op is disabled (`custom_ops=['none']`, the default in
  compiled mode) — under torch.compile the call goes through the opaque op in `torch_ops`;
- `forward_cpu`: used on the CPU platform when the op is enabled (the eager default, `['all']`);
- `forward_oot`: used on out-of-tree platforms.
`forward_cuda` is left to vLLM: on a CUDA machine (the one the user migrates *from*) vLLM's kernels stay.

Calls that the registry ops do not cover (RMSNorm with `var_hidden_size` or without a weight) fall back
to vLLM's own forward of the same kind, so the override never changes what a model can do.

After `register_oot` the class's `name` is reset to vLLM's in-tree name (`rms_norm`, ...): vLLM reads
`cls.name` to honour `custom_ops=['+rms_norm' / '-rms_norm']`, and that switch must keep working.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

import torch
from vllm.model_executor.custom_op import CustomOp, op_registry_oot
from vllm.model_executor.layers.activation import GELU, GELUTanh, SiluAndMul
from vllm.model_executor.layers.layernorm import RMSNorm
from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding

from ascend_backend.vllm_plugin import torch_ops

logger = logging.getLogger("vllm.ascend_backend.custom_ops")


class AscendBackendRMSNorm(RMSNorm):
    """RMSNorm -> registry ops `rms_norm` / `add_rms_norm` (with residual)."""

    def _registry_covers(self) -> bool:
        return self.variance_size_override is None and self.has_weight

    def forward_native(
        self, x: torch.Tensor, residual: torch.Tensor | None = None
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        # x, residual: [num_tokens, hidden]
        if not self._registry_covers():
            return super().forward_native(x, residual)
        if residual is None:
            return torch_ops.call_rms_norm(x, self.weight.data, self.variance_epsilon)
        return torch_ops.call_add_rms_norm(x, residual, self.weight.data, self.variance_epsilon)

    def forward_cpu(self, x: torch.Tensor, residual: torch.Tensor | None = None):
        return self.forward_native(x, residual)

    def forward_oot(self, x: torch.Tensor, residual: torch.Tensor | None = None):
        return self.forward_native(x, residual)


class AscendBackendSiluAndMul(SiluAndMul):
    """SiluAndMul -> registry op `silu_and_mul`: [..., 2d] -> [..., d]."""

    def forward_native(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return torch_ops.call_silu_and_mul(x)

    def forward_cpu(self, x: torch.Tensor) -> torch.Tensor:
        return torch_ops.call_silu_and_mul(x)

    def forward_oot(self, x: torch.Tensor) -> torch.Tensor:
        return torch_ops.call_silu_and_mul(x)


class AscendBackendGELU(GELU):
    """GELU (erf) -> registry op `gelu`."""

    def forward_native(self, x: torch.Tensor) -> torch.Tensor:
        return torch_ops.call_gelu(x)

    def forward_cpu(self, x: torch.Tensor) -> torch.Tensor:
        return torch_ops.call_gelu(x)

    def forward_oot(self, x: torch.Tensor) -> torch.Tensor:
        return torch_ops.call_gelu(x)


class AscendBackendGELUTanh(GELUTanh):
    """GELU (tanh approximation) -> registry op `gelu_tanh`."""

    def forward_native(self, x: torch.Tensor) -> torch.Tensor:
        return torch_ops.call_gelu_tanh(x)

    def forward_cpu(self, x: torch.Tensor) -> torch.Tensor:
        return torch_ops.call_gelu_tanh(x)

    def forward_oot(self, x: torch.Tensor) -> torch.Tensor:
        return torch_ops.call_gelu_tanh(x)


class AscendBackendRotaryEmbedding(RotaryEmbedding):
    """RotaryEmbedding (plain RoPE, neox or gpt-j, partial rotary) -> registry op `rotary_embedding`.

    Unlike vLLM's CPU kernel this does not rotate in place: it returns rotated copies, which every
    vLLM model uses (`q, k = self.rotary_emb(positions, q, k)`).
    """

    def forward_native(
        self, positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        # positions: [T]; query: [T, Hq*D]; key: [T, Hk*D]; cache: [max_position, rotary_dim] = [cos | sin]
        cache = self._match_cos_sin_cache_dtype(query)
        return torch_ops.call_rotary_embedding(positions, query, key, self.head_size, cache, self.is_neox_style)

    def forward_cpu(self, positions, query, key=None):
        return self.forward_native(positions, query, key)

    def forward_oot(self, positions, query, key=None):
        return self.forward_native(positions, query, key)


@dataclass(frozen=True)
class LayerOverride:
    """One vLLM layer we replace: the class name vLLM looks up, and the registry ops it routes to."""

    layer: str  # class name CustomOp.__new__ looks up, e.g. "RMSNorm"
    ops: tuple[str, ...]  # registry op names; naming any of them in ASCEND_BACKEND_DISABLED_OPS skips it
    cls: type[CustomOp]

    @property
    def vllm_name(self) -> str:
        """vLLM's in-tree custom-op name (`rms_norm`), as used in `custom_ops=['-rms_norm']`."""
        return self.cls.__mro__[1].name


LAYER_OVERRIDES: tuple[LayerOverride, ...] = (
    LayerOverride("RMSNorm", ("rms_norm", "add_rms_norm"), AscendBackendRMSNorm),
    LayerOverride("SiluAndMul", ("silu_and_mul",), AscendBackendSiluAndMul),
    LayerOverride("RotaryEmbedding", ("rotary_embedding",), AscendBackendRotaryEmbedding),
    LayerOverride("GELU", ("gelu",), AscendBackendGELU),
    LayerOverride("GELUTanh", ("gelu_tanh",), AscendBackendGELUTanh),
)


class InstallStatus(str, enum.Enum):
    INSTALLED = "installed"
    ALREADY_INSTALLED = "already installed"  # register() ran before in this process
    DISABLED = "disabled by ASCEND_BACKEND_DISABLED_OPS"
    TAKEN = "another plugin owns this layer"  # e.g. vllm-ascend registered its own override first


@dataclass(frozen=True)
class InstallResult:
    layer: str
    status: InstallStatus
    detail: str = ""


def is_disabled(override: LayerOverride, disabled: frozenset[str]) -> bool:
    """'*' disables all; otherwise any of the override's registry ops, its layer or vLLM name."""
    names = {*override.ops, override.layer, override.vllm_name}
    return "*" in disabled or bool(names & disabled)


def install_layer_overrides(disabled: frozenset[str]) -> tuple[InstallResult, ...]:
    """Register every override not disabled; never replaces a layer another plugin already owns."""
    results = []
    for override in LAYER_OVERRIDES:
        current = op_registry_oot.get(override.layer)
        if is_disabled(override, disabled):
            results.append(InstallResult(override.layer, InstallStatus.DISABLED))
        elif current is override.cls:
            results.append(InstallResult(override.layer, InstallStatus.ALREADY_INSTALLED))
        elif current is not None:
            results.append(
                InstallResult(override.layer, InstallStatus.TAKEN, f"{current.__module__}.{current.__qualname__}")
            )
        else:
            in_tree_name = override.vllm_name
            CustomOp.register_oot(_decorated_op_cls=override.cls, name=override.layer)
            override.cls.name = in_tree_name  # keep '+rms_norm' / '-rms_norm' working (see module doc)
            results.append(InstallResult(override.layer, InstallStatus.INSTALLED))
    return tuple(results)


def uninstall_layer_overrides() -> None:
    """Remove our overrides from vLLM's registry (tests use this to compare with and without them)."""
    for override in LAYER_OVERRIDES:
        if op_registry_oot.get(override.layer) is override.cls:
            del op_registry_oot[override.layer]
