"""Every attention op is in the registry with a native and an NPU implementation; NPU-side helpers."""

from __future__ import annotations

import pytest
import torch

from ascend_backend.attention import ATTENTION_OPS
from ascend_backend.npu.adapters import attention as npu
from ascend_backend.platform.device import npu_status
from ascend_backend.registry import REGISTRY, Backend


@pytest.mark.parametrize("op", ATTENTION_OPS)
def test_op_has_native_and_npu_implementations(op):
    entry = REGISTRY.entry(op)
    assert {Backend.NATIVE, Backend.NPU} <= set(entry.impls)
    assert entry.doc
    assert REGISTRY.select(op, "cpu").backend is Backend.NATIVE


@pytest.mark.skipif(npu_status().available, reason="checks the table of a machine without an NPU")
def test_registry_table_lists_the_attention_ops_with_both_backends():
    table = REGISTRY.describe("cpu").set_index("op")
    for op in ATTENTION_OPS:
        assert table.loc[op, "registered"] == "native, npu"
        assert table.loc[op, "chosen"] == "native"


def test_atb_causal_mask_uses_vllm_ascend_values():
    fp16 = npu.atb_causal_mask(3, torch.float16, "cpu")
    assert fp16.dtype == torch.float16
    assert torch.isinf(fp16.float()).tolist() == [[False, True, True], [False, False, True], [False, False, False]]
    assert npu.atb_causal_mask(3, torch.bfloat16, "cpu").float().tolist() == [[0, 1, 1], [0, 0, 1], [0, 0, 0]]


def test_splitfuse_mask_rows_follow_token_positions():
    # seq 0: 2 new tokens at positions 3, 4 of 5; seq 1: a decode at position 1 of 2
    mask = npu.atb_splitfuse_mask([2, 1], [5, 2], torch.bfloat16, "cpu").float()
    m = torch.tensor(npu.ATB_SPLITFUSE_BF16_MASK_VALUE).bfloat16().item()  # -9984: -10000 rounded to bf16
    assert mask.tolist() == [[0, 0, 0, 0, m], [0, 0, 0, 0, 0], [0, 0, m, m, m]]


def test_fia_mask_is_the_shared_int8_upper_triangle():
    mask = npu.fia_causal_mask("cpu")
    assert mask.shape == (2048, 2048) and mask.dtype == torch.int8
    assert mask[0, 1] == 1 and mask[1, 1] == 0 and int(mask.sum()) == 2048 * 2047 // 2
