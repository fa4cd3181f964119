"""A compact Llama/Qwen2 executor on registry ops, paged attention and the KV-cache manager.

config     HF config.json -> ModelConfig (rope theta/scaling, GQA, tied embeddings, qkv bias)
rope       the model's cos/sin cache
layers     decoder modules named like HF's (dumps line up by module name)
loader     safetensors -> CausalLM on a device, in a dtype (float, or W8A8 in either quantized format)
quantized  the W8A8 linear modules a quantized checkpoint loads into
sampling   greedy and temperature/top-p
executor   batched prefill + decode with prefix caching
"""

from ascend_backend.models.config import ModelConfig, ModelConfigError
from ascend_backend.models.executor import Executor, GenerationResult, OutOfKVBlocks
from ascend_backend.models.layers import CausalLM
from ascend_backend.models.loader import CheckpointError, load_model
from ascend_backend.models.sampling import SamplingParams, sample

__all__ = [
    "CausalLM",
    "CheckpointError",
    "Executor",
    "GenerationResult",
    "ModelConfig",
    "ModelConfigError",
    "OutOfKVBlocks",
    "SamplingParams",
    "load_model",
    "sample",
]
