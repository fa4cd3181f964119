"""KV-cache sizing: worked numbers computed by hand here, block-size rules, and the error messages."""

from __future__ import annotations

import pytest

from ascend_backend.kv_cache.sizing import (
    BLOCK_SIZE_RULES,
    DeviceKind,
    KVCacheMemoryError,
    KVCacheSpec,
    KVDtype,
    MemoryBudget,
    blocks_per_sequence,
    plan_kv_cache,
)

GIB = 1024**3
MIB = 1024**2
# Llama-3-8B: 32 layers, 8 KV heads (GQA), head size 128 -> the well-known 128 KiB of bf16 KV per token.
LLAMA3_8B = KVCacheSpec(num_layers=32, num_kv_heads=8, head_size=128, dtype=KVDtype.BFLOAT16)


def test_bytes_per_block_llama3_8b():
    assert LLAMA3_8B.bytes_per_token() == 128 * 1024
    assert LLAMA3_8B.bytes_per_block(16) == 2 * MIB
    assert LLAMA3_8B.bytes_per_block(128) == 16 * MIB
    smollm2 = KVCacheSpec(num_layers=30, num_kv_heads=3, head_size=64, dtype=KVDtype.FLOAT32)
    assert smollm2.bytes_per_block(32) == 2 * 30 * 3 * 64 * 32 * 4 == 1_474_560


def test_spec_from_hf_config():
    smollm2 = {  # SmolLM2-135M config.json fields
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "hidden_size": 576,
        "torch_dtype": "bfloat16",
    }
    spec = KVCacheSpec.from_hf_config(smollm2)
    assert spec == KVCacheSpec(num_layers=30, num_kv_heads=3, head_size=64, dtype=KVDtype.BFLOAT16)
    assert spec.bytes_per_token() == 2 * 30 * 3 * 64 * 2 == 23_040
    assert KVCacheSpec.from_hf_config(smollm2, kv_dtype="fp8").dtype is KVDtype.FP8
    # Tensor parallel 2 leaves 1 KV head per device; tp 4 cannot split 3 heads further (replicated).
    assert KVCacheSpec.from_hf_config(smollm2, tensor_parallel_size=2).num_kv_heads == 1
    assert KVCacheSpec.from_hf_config(smollm2, tensor_parallel_size=4).num_kv_heads == 1
    explicit_head_dim = {**smollm2, "head_dim": 128, "num_key_value_heads": None}
    assert KVCacheSpec.from_hf_config(explicit_head_dim).num_kv_heads == 9
    assert KVCacheSpec.from_hf_config(explicit_head_dim).head_size == 128
    with pytest.raises(ValueError, match="model config has no 'num_hidden_layers'"):
        KVCacheSpec.from_hf_config({k: v for k, v in smollm2.items() if k != "num_hidden_layers"})


def test_plan_on_a_64_gib_npu():
    budget = MemoryBudget(
        device_memory=64 * GIB, utilization=0.9, weights=16 * GIB, activation_peak=2 * GIB, runtime_reserve=GIB
    )
    plan = plan_kv_cache(LLAMA3_8B, budget, block_size=128, target=DeviceKind.NPU, max_model_len=8192)
    # By hand: 64 GiB * 0.9 = 57.6 GiB; minus 16 + 2 + 1 GiB = 38.6 GiB for the KV cache.
    kv_bytes = 61_847_529_062 - 19 * GIB
    assert plan.kv_cache_bytes == kv_bytes == 41_446_434_406
    assert plan.bytes_per_block == 16_777_216
    assert plan.num_blocks == 2470  # 41,446,434,406 / 16,777,216 = 2470.4
    assert plan.blocks_per_seq == 64  # 8192 / 128
    assert plan.max_concurrent_seqs == 38  # (2470 - 1 null block) // 64 = 38.6
    assert plan.warnings == ()


def test_module_docstring_example_holds():
    qwen2_7b = KVCacheSpec(num_layers=28, num_kv_heads=4, head_size=128, dtype=KVDtype.BFLOAT16)
    budget = MemoryBudget(64 * GIB, 0.9, weights=15 * GIB, activation_peak=4 * GIB, runtime_reserve=2 * GIB)
    plan = plan_kv_cache(qwen2_7b, budget, 128, DeviceKind.NPU, max_model_len=8192)
    assert plan.bytes_per_block == 7_340_032
    assert plan.kv_cache_bytes == 39_298_950_758
    assert (plan.num_blocks, plan.max_concurrent_seqs) == (5354, 83)


def test_bigger_blocks_can_lower_concurrency():
    """Block 128 wastes up to 127 slots per sequence: at max_model_len 8200 it costs a whole sequence."""
    budget = MemoryBudget(device_memory=64 * GIB, utilization=0.9, weights=16 * GIB, activation_peak=3 * GIB)
    small = plan_kv_cache(LLAMA3_8B, budget, 16, DeviceKind.CUDA, max_model_len=8200)
    large = plan_kv_cache(LLAMA3_8B, budget, 128, DeviceKind.NPU, max_model_len=8200)
    # KV bytes: 61,847,529,062 - 19 GiB = 41,446,434,406 either way.
    assert small.num_blocks == 41_446_434_406 // (2 * MIB) == 19763
    assert large.num_blocks == 41_446_434_406 // (16 * MIB) == 2470
    assert small.blocks_per_seq == 513 and large.blocks_per_seq == 65  # ceil(8200/16), ceil(8200/128)
    assert small.max_concurrent_seqs == 19762 // 513 == 38
    assert large.max_concurrent_seqs == 2469 // 65 == 37


def test_high_utilization_warns_on_npu_only():
    budget = MemoryBudget(device_memory=64 * GIB, utilization=0.97, weights=16 * GIB)
    npu = plan_kv_cache(LLAMA3_8B, budget, 128, DeviceKind.NPU, max_model_len=4096)
    assert len(npu.warnings) == 1 and "above 0.95" in npu.warnings[0] and "CANN" in npu.warnings[0]
    cpu = plan_kv_cache(LLAMA3_8B, budget, 128, DeviceKind.CPU, max_model_len=4096)
    assert cpu.warnings == ()


def test_no_memory_left_names_the_knobs():
    budget = MemoryBudget(device_memory=32 * GIB, utilization=0.85, weights=26 * GIB, activation_peak=2 * GIB)
    with pytest.raises(KVCacheMemoryError) as err:
        plan_kv_cache(LLAMA3_8B, budget, 128, DeviceKind.NPU, max_model_len=32768, max_num_seqs=256)
    message = str(err.value)
    # 32 GiB * 0.85 = 27.2 GiB; minus 28 GiB = -0.80 GiB.
    assert "no memory left for the KV cache" in message and "-0.80 GiB" in message
    for knob in ("--max-model-len (now 32768)", "--max-num-seqs (now 256)", "--gpu-memory-utilization (now 0.85"):
        assert knob in message


def test_exactly_zero_left_is_also_an_error():
    budget = MemoryBudget(device_memory=10 * GIB, utilization=0.5, weights=5 * GIB)
    with pytest.raises(KVCacheMemoryError, match="= 0.00 GiB"):
        plan_kv_cache(LLAMA3_8B, budget, 16, DeviceKind.CUDA, max_model_len=1024)


def test_one_sequence_must_fit():
    # 1 GiB of KV = 64 blocks of 16 MiB; 63 usable after the null block hold 63 * 128 = 8064 tokens.
    budget = MemoryBudget(device_memory=20 * GIB, utilization=1.0, weights=19 * GIB)
    with pytest.raises(KVCacheMemoryError, match=r"cannot hold one sequence of --max-model-len 16384") as err:
        plan_kv_cache(LLAMA3_8B, budget, 128, DeviceKind.NPU, max_model_len=16384)
    assert "lower --max-model-len to at most 8064" in str(err.value)
    fits = plan_kv_cache(LLAMA3_8B, budget, 128, DeviceKind.NPU, max_model_len=8064)
    assert fits.num_blocks == 64 and fits.max_concurrent_seqs == 1


def test_fewer_full_length_sequences_than_max_num_seqs_warns():
    budget = MemoryBudget(device_memory=20 * GIB, utilization=1.0, weights=18 * GIB)  # 128 blocks
    plan = plan_kv_cache(LLAMA3_8B, budget, 128, DeviceKind.CPU, max_model_len=4096, max_num_seqs=8)
    assert plan.max_concurrent_seqs == 127 // 32 == 3
    assert len(plan.warnings) == 1 and "only 3 sequences of 4096 tokens" in plan.warnings[0]


@pytest.mark.parametrize(
    ("target", "block_size", "problem"),
    [
        (DeviceKind.NPU, 128, None),
        (DeviceKind.NPU, 16, "use [128]"),
        (DeviceKind.NPU, 256, "use [128]"),
        (DeviceKind.CPU, 32, None),
        (DeviceKind.CPU, 128, None),
        (DeviceKind.CPU, 16, "a multiple of 32"),
        (DeviceKind.CUDA, 16, None),
        (DeviceKind.CUDA, 8, "a multiple of 16"),
    ],
)
def test_block_size_rules(target, block_size, problem):
    found = BLOCK_SIZE_RULES[target].problem(block_size)
    if problem is None:
        assert found is None
    else:
        assert problem in found and f"--block-size {block_size}" in found


def test_wrong_block_size_is_refused_by_the_planner():
    budget = MemoryBudget(device_memory=64 * GIB, utilization=0.9, weights=16 * GIB)
    with pytest.raises(KVCacheMemoryError, match="--block-size 16 does not suit the npu target"):
        plan_kv_cache(LLAMA3_8B, budget, 16, DeviceKind.NPU, max_model_len=4096)


def test_bad_inputs():
    with pytest.raises(ValueError, match="--gpu-memory-utilization must be in"):
        MemoryBudget(device_memory=GIB, utilization=1.2, weights=0)
    with pytest.raises(ValueError, match="--gpu-memory-utilization must be in"):
        MemoryBudget(device_memory=GIB, utilization=0.0, weights=0)
    with pytest.raises(ValueError, match="weights must be >= 0"):
        MemoryBudget(device_memory=GIB, utilization=0.5, weights=-1)
    with pytest.raises(ValueError, match="num_kv_heads must be >= 1"):
        KVCacheSpec(num_layers=2, num_kv_heads=0, head_size=64, dtype=KVDtype.FLOAT16)
    with pytest.raises(ValueError, match="unknown KV-cache dtype 'float7'"):
        KVDtype.parse("float7")


def test_dtype_parsing_and_sequence_rounding():
    assert KVDtype.parse("torch.bfloat16") is KVDtype.BFLOAT16
    assert KVDtype.parse("bf16") is KVDtype.BFLOAT16
    assert KVDtype.parse("half") is KVDtype.FLOAT16
    assert KVDtype.parse("fp8_e4m3") is KVDtype.FP8 and KVDtype.FP8.nbytes == 1
    assert KVDtype.parse("float32").nbytes == 4
    assert blocks_per_sequence(8192, 128) == 64
    assert blocks_per_sequence(8193, 128) == 65
    assert blocks_per_sequence(1, 128) == 1
