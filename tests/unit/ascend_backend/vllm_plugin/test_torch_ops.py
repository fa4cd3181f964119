"""The opaque operators compiled vLLM calls: schemas, fake (meta) shapes and strides, and tracing.

torch.library.opcheck runs each operator for real and under fake tensors and compares: a fake that
promised the wrong shape or strides, or a body that aliased or mutated an input, fails here.
"""

from __future__ import annotations

import pytest
import torch

from ascend_backend.ops import build_cos_sin_cache
from ascend_backend.registry import REGISTRY
from ascend_backend.vllm_plugin import torch_ops  # noqa: F401  (defines torch.ops.ascend_backend.*)

OPS = torch.ops.ascend_backend
POSITIONS = torch.tensor([0, 3, 7, 2])


def cases():
    x, w = torch.randn(4, 64), torch.randn(64)
    q, k = torch.randn(4, 2 * 64), torch.randn(4, 64)
    cache = build_cos_sin_cache(64, 16)
    return [
        ("rms_norm", (x, w, 1e-5)),
        ("add_rms_norm", (x, torch.randn(4, 64), w, 1e-5)),
        ("silu_and_mul", (torch.randn(4, 128),)),
        ("gelu", (x,)),
        ("gelu_tanh", (x,)),
        ("rotary_embedding", (POSITIONS, q, k, 64, cache, True)),
        ("rotary_embedding_query", (POSITIONS, q, 64, cache, False)),
    ]


@pytest.mark.parametrize("name,args", cases(), ids=[name for name, _ in cases()])
def test_operator_schema_and_fake_match_the_real_call(name, args):
    result = torch.library.opcheck(
        getattr(OPS, name), args, test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_static")
    )
    assert set(result.values()) == {"SUCCESS"}, result


@pytest.mark.parametrize(
    "name,op,dropped",
    [
        ("rms_norm", "rms_norm", ()),
        ("add_rms_norm", "add_rms_norm", ()),
        ("silu_and_mul", "silu_and_mul", ()),
        ("gelu", "gelu", ()),
        ("gelu_tanh", "gelu_tanh", ()),
        ("rotary_embedding", "rotary_embedding", ()),
        ("rotary_embedding_query", "rotary_embedding", ("key",)),
    ],
)
def test_operator_schemas_take_the_ops_declared_parameters(name, op, dropped):
    schema = getattr(OPS, name).default._schema
    declared = [p for p in REGISTRY.signature(op).parameters if p not in dropped]
    assert [a.name for a in schema.arguments] == declared
