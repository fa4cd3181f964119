"""What counts as CUDA-bound: the names, packages, environment variables and option values the rules look
for, in one place so the Python rules and the text rules agree.

This module only *recognises* things (name -> rule id). What a rule means on Ascend is in the mapping
table, policy/scan/cuda-mapping.yaml. Lists of vLLM names were read from vLLM 0.32.0
(`vllm/v1/attention/backends/registry.py`, `vllm/model_executor/layers/quantization/__init__.py`,
`vllm/envs.py`). Which quantization methods vllm-ascend refuses is not listed here: it comes from the
capability table lint shares (workbench.truth.capabilities), read from every release's source.
"""

from __future__ import annotations

import re

from workbench.scan.rule_ids import Rule

# -- Python modules -> rule (an import of the module or any submodule) --------------------------------
_MODULE_RULES: tuple[tuple[str, Rule], ...] = (
    ("flash_attn", Rule.LIB_FLASH_ATTN),
    ("flash_attn_interface", Rule.LIB_FLASH_ATTN),
    ("flash_attn_2_cuda", Rule.LIB_FLASH_ATTN),
    ("vllm_flash_attn", Rule.LIB_FLASH_ATTN),
    ("vllm.vllm_flash_attn", Rule.LIB_FLASH_ATTN),
    ("xformers", Rule.LIB_XFORMERS),
    ("flashinfer", Rule.LIB_FLASHINFER),
    ("bitsandbytes", Rule.LIB_BITSANDBYTES),
    ("apex", Rule.LIB_APEX),
    ("deepspeed.ops", Rule.LIB_DEEPSPEED_OPS),
    ("deepspeed.inference", Rule.LIB_DEEPSPEED_OPS),
    ("cupy", Rule.LIB_CUPY),
    ("cupyx", Rule.LIB_CUPY),
    ("pynvml", Rule.LIB_NVML),
    ("pynvml_utils", Rule.LIB_NVML),
    ("py3nvml", Rule.LIB_NVML),
    ("nvidia_smi", Rule.LIB_NVML),
    ("pycuda", Rule.LIB_CUDA_BINDINGS),
    ("cuda", Rule.LIB_CUDA_BINDINGS),  # cuda-python: `from cuda import cudart`, `cuda.bindings`
    ("numba.cuda", Rule.LIB_CUDA_BINDINGS),
    ("nvidia", Rule.LIB_CUDA_BINDINGS),  # the namespace of the nvidia-* wheels (nvidia.cublas, nvidia.nccl, ...)
    ("tensorrt", Rule.LIB_TENSORRT),
    ("tensorrt_llm", Rule.LIB_TENSORRT),
    ("torch_tensorrt", Rule.LIB_TENSORRT),
    ("deep_gemm", Rule.LIB_CUDA_KERNELS),
    ("deep_ep", Rule.LIB_CUDA_KERNELS),
    ("pplx_kernels", Rule.LIB_CUDA_KERNELS),
    ("flash_mla", Rule.LIB_CUDA_KERNELS),
    ("sgl_kernel", Rule.LIB_CUDA_KERNELS),
    ("cutlass", Rule.LIB_CUDA_KERNELS),
    ("cutlass_library", Rule.LIB_CUDA_KERNELS),
    ("triton", Rule.LIB_TRITON),
    ("triton_kernels", Rule.LIB_TRITON),
    ("vllm._C", Rule.LIB_VLLM_CUDA_OPS),
    ("vllm._custom_ops", Rule.LIB_VLLM_CUDA_OPS),
    ("vllm._moe_C", Rule.LIB_VLLM_CUDA_OPS),
    ("vllm._flashmla_C", Rule.LIB_VLLM_CUDA_OPS),
    ("vllm._flashmla_extension_C", Rule.LIB_VLLM_CUDA_OPS),
    ("vllm.cumem_allocator", Rule.LIB_VLLM_CUDA_OPS),
    ("vllm.distributed.device_communicators.pynccl", Rule.NCCL_LIBRARY),
    ("vllm.distributed.device_communicators.pynccl_wrapper", Rule.NCCL_LIBRARY),
)

# torch.ops namespaces that hold vLLM's compiled CUDA kernels (csrc/ registers them).
VLLM_OP_NAMESPACES = frozenset(
    ("_C _moe_C _C_cache_ops _C_custom_ar _flashmla_C _flashmla_extension_C _vllm_fa2_C _vllm_fa3_C").split()
)


def module_rule(module: str) -> Rule | None:
    """The library rule for an absolute module name ('flash_attn.bert_padding' -> lib.flash_attn), else None."""
    for prefix, rule in _MODULE_RULES:
        if module == prefix or module.startswith(prefix + "."):
            return rule
    return None


# -- distributions (requirements, lock files, pip install lines) -> rule ------------------------------
_PACKAGE_RULES: dict[str, Rule] = {
    "flash-attn": Rule.LIB_FLASH_ATTN,
    "flash-attn-3": Rule.LIB_FLASH_ATTN,
    "vllm-flash-attn": Rule.LIB_FLASH_ATTN,
    "xformers": Rule.LIB_XFORMERS,
    "flashinfer": Rule.LIB_FLASHINFER,
    "flashinfer-python": Rule.LIB_FLASHINFER,
    "flashinfer-cubin": Rule.LIB_FLASHINFER,
    "flashinfer-jit-cache": Rule.LIB_FLASHINFER,
    "bitsandbytes": Rule.LIB_BITSANDBYTES,
    "apex": Rule.LIB_APEX,
    "pynvml": Rule.LIB_NVML,
    "nvidia-ml-py": Rule.LIB_NVML,
    "nvidia-ml-py3": Rule.LIB_NVML,
    "py3nvml": Rule.LIB_NVML,
    "pycuda": Rule.LIB_CUDA_BINDINGS,
    "cuda-python": Rule.LIB_CUDA_BINDINGS,
    "cuda-bindings": Rule.LIB_CUDA_BINDINGS,
    "cuda-core": Rule.LIB_CUDA_BINDINGS,
    "numba-cuda": Rule.LIB_CUDA_BINDINGS,
    "tensorrt": Rule.LIB_TENSORRT,
    "tensorrt-llm": Rule.LIB_TENSORRT,
    "torch-tensorrt": Rule.LIB_TENSORRT,
    "deep-gemm": Rule.LIB_CUDA_KERNELS,
    "deep-ep": Rule.LIB_CUDA_KERNELS,
    "pplx-kernels": Rule.LIB_CUDA_KERNELS,
    "flash-mla": Rule.LIB_CUDA_KERNELS,
    "sgl-kernel": Rule.LIB_CUDA_KERNELS,
    "nvidia-cutlass": Rule.LIB_CUDA_KERNELS,
    "nvidia-cutlass-dsl": Rule.LIB_CUDA_KERNELS,
    "triton": Rule.LIB_TRITON,
    "pytorch-triton": Rule.LIB_TRITON,
    "triton-kernels": Rule.LIB_TRITON,
    "cudatoolkit": Rule.DEPS_NVIDIA_PACKAGE,
    "cuda-toolkit": Rule.DEPS_NVIDIA_PACKAGE,
    "cuda-runtime": Rule.DEPS_NVIDIA_PACKAGE,
    "cuda-nvcc": Rule.DEPS_NVIDIA_PACKAGE,
    "pytorch-cuda": Rule.DEPS_NVIDIA_PACKAGE,
    "cudnn": Rule.DEPS_NVIDIA_PACKAGE,
    "nccl": Rule.DEPS_NVIDIA_PACKAGE,
    "vllm": Rule.DEPS_VLLM_WHEEL,
}


def normalize_package(name: str) -> str:
    """PEP 503 normal form: 'Flash_Attn' -> 'flash-attn'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def package_rule(name: str) -> Rule | None:
    """The rule for a distribution name ('cupy-cuda12x' -> lib.cupy, 'nvidia-cublas-cu12' -> deps.nvidia_package)."""
    normal = normalize_package(name)
    if normal in _PACKAGE_RULES:
        return _PACKAGE_RULES[normal]
    if normal.startswith("cupy"):
        return Rule.LIB_CUPY
    if normal.startswith("tensorrt"):
        return Rule.LIB_TENSORRT
    if normal.startswith("nvidia-"):
        return Rule.DEPS_NVIDIA_PACKAGE
    return None


# -- environment variables -------------------------------------------------------------------------
# Tokens that make a VLLM_* variable CUDA-specific (read from vllm/envs.py of vLLM 0.32.0).
_VLLM_CUDA_TOKENS = (
    "FLASHINFER",
    "FLASH_ATTN",
    "CUDA",
    "CUDNN",
    "NCCL",
    "TRTLLM",
    "DEEP_GEMM",
    "DEEPEP",
    "MARLIN",
    "CUTLASS",
    "NVFP4",
    "NVTX",
    "NVSHMEM",
    "PPLX",
    "CUBLAS",
    "MNNVL",
    "CUMEM",
)
_CUDA_TOOLKIT_VARS = frozenset(
    (
        "CUDA_HOME CUDA_PATH CUDA_ROOT CUDA_TOOLKIT_ROOT_DIR CUDACXX TORCH_CUDA_ARCH_LIST CUDA_ARCH_LIST "
        "CUDNN_HOME CUDNN_PATH CUDA_NVCC_FLAGS"
    ).split()
)
# Candidate names in free text; env_rule decides whether one is CUDA-bound.
ENV_NAME_RE = re.compile(
    r"\b(?:CUDA|NCCL|TORCH_NCCL|NVIDIA|CUDNN|CUBLAS|PYTORCH_CUDA|PYTORCH_NO_CUDA|TORCH_CUDA|VLLM)_[A-Z0-9_]+\b|\bCUDACXX\b"
)


def env_rule(name: str) -> Rule | None:
    """The rule for an environment variable name, or None when it does not tie the service to CUDA."""
    if name == "CUDA_VISIBLE_DEVICES":
        return Rule.ENV_CUDA_VISIBLE_DEVICES
    if name.startswith("NVIDIA_"):
        return Rule.ENV_NVIDIA_CONTAINER
    if name == "CUDA_LAUNCH_BLOCKING":
        return Rule.ENV_CUDA_LAUNCH_BLOCKING
    if name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING"):
        return Rule.ENV_CUDA_ALLOC_CONF
    if name in _CUDA_TOOLKIT_VARS:
        return Rule.ENV_CUDA_TOOLKIT
    if name.startswith(("NCCL_", "TORCH_NCCL_")):
        return Rule.ENV_NCCL
    if name == "VLLM_ATTENTION_BACKEND":
        return Rule.VLLM_ATTENTION_BACKEND
    if name.startswith("VLLM_"):
        return Rule.VLLM_CUDA_ENV if any(token in name for token in _VLLM_CUDA_TOKENS) else None
    if name.startswith(("CUDA_", "CUDNN_", "CUBLAS_", "TORCH_CUDA_", "PYTORCH_CUDA_")):
        return Rule.ENV_CUDA_OTHER
    return None


# -- torch names -----------------------------------------------------------------------------------
_GRAPH_NAMES = frozenset({"graph", "graphs", "CUDAGraph", "make_graphed_callables", "graph_pool_handle"})
_CAPABILITY_NAMES = frozenset({"get_device_capability", "get_arch_list", "get_gencode_flags"})
# Submodules of torch_npu.npu that are not in its __all__ but exist under the same name.
_NPU_SUBMODULES = frozenset({"amp", "random", "memory", "streams", "graphs"})
_SDP_NAMES = frozenset(
    (
        "sdp_kernel enable_flash_sdp enable_mem_efficient_sdp enable_math_sdp enable_cudnn_sdp "
        "flash_sdp_enabled mem_efficient_sdp_enabled math_sdp_enabled cudnn_sdp_enabled SDPBackend "
        "can_use_flash_attention can_use_efficient_attention"
    ).split()
)
FP8_DTYPES = frozenset(
    (
        "torch.float8_e4m3fn torch.float8_e4m3fnuz torch.float8_e5m2 torch.float8_e5m2fnuz "
        "torch.float8_e8m0fnu torch.float4_e2m1fn_x2"
    ).split()
)
_NCCL_NAMES = frozenset(
    (
        "torch.distributed.Backend.NCCL torch.distributed.is_nccl_available "
        "torch.distributed.ProcessGroupNCCL torch.distributed.distributed_c10d.ProcessGroupNCCL"
    ).split()
)
_EXTENSION_NAMES = frozenset(
    (
        "torch.utils.cpp_extension.CUDAExtension torch.utils.cpp_extension.CUDA_HOME "
        "torch.utils.cpp_extension.CUDNN_HOME"
    ).split()
)


def _torch_cuda_rule(name: str, npu_names: frozenset[str]) -> Rule:
    """torch.cuda.<name>: which rule, given the names torch.npu provides under transfer_to_npu."""
    if name == "amp":
        return Rule.AMP_CUDA
    if name in _GRAPH_NAMES:
        return Rule.CUDA_GRAPH_CAPTURE
    if name == "nvtx":
        return Rule.TORCH_CUDA_NVTX
    if name == "nccl":
        return Rule.NCCL_LIBRARY
    if name in _CAPABILITY_NAMES:
        return Rule.TORCH_CUDA_CAPABILITY
    if name in npu_names or name in _NPU_SUBMODULES:
        return Rule.TORCH_CUDA_API
    return Rule.TORCH_CUDA_UNMAPPED


def torch_rule(qualname: str, npu_names: frozenset[str]) -> Rule | None:
    """The rule for a fully qualified torch name ('torch.cuda.synchronize'), or None."""
    parts = qualname.split(".")
    if parts[0] != "torch" or len(parts) < 2:
        return None
    if parts[1] == "cuda":
        return Rule.TORCH_CUDA_API if len(parts) == 2 else _torch_cuda_rule(parts[2], npu_names)
    if qualname in ("torch.version.cuda", "torch.backends.cuda.is_built", "torch.backends.cudnn.version"):
        return Rule.TORCH_CUDA_CAPABILITY
    if qualname.startswith("torch.backends.cudnn"):
        return Rule.BACKENDS_TF32 if parts[-1] == "allow_tf32" else Rule.BACKENDS_CUDNN
    if qualname.startswith("torch.backends.cuda"):
        if len(parts) > 3 and parts[3] == "matmul":
            return Rule.BACKENDS_TF32
        return Rule.BACKENDS_SDP if len(parts) > 3 and parts[3] in _SDP_NAMES else Rule.BACKENDS_CUDA_OTHER
    if qualname == "torch.nn.attention.sdpa_kernel" or qualname.startswith("torch.nn.attention.SDPBackend."):
        return Rule.BACKENDS_SDP
    if qualname in FP8_DTYPES:
        return Rule.DTYPE_FP8
    if qualname in _NCCL_NAMES:
        return Rule.NCCL_BACKEND
    if qualname in _EXTENSION_NAMES:
        return Rule.EXT_CUDA_EXTENSION
    if qualname == "torch.ops.load_library":
        return Rule.EXT_LOAD_LIBRARY
    if len(parts) > 2 and parts[1] == "ops" and parts[2] in VLLM_OP_NAMESPACES:
        return Rule.LIB_VLLM_CUDA_OPS
    return None


# -- string values ---------------------------------------------------------------------------------
# 'cuda', 'cuda:0', and templates that format an index into it ('cuda:%d', 'cuda:{}', 'cuda:{rank}').
CUDA_DEVICE_RE = re.compile(r"cuda(?::(?:\d+|%d|%s|%i|\{[^{}]*\}))?")


def is_cuda_device(value: str) -> bool:
    return CUDA_DEVICE_RE.fullmatch(value) is not None


def is_nccl_backend(value: str) -> bool:
    """'nccl', or a per-device backend string such as 'cpu:gloo,cuda:nccl'."""
    return value == "nccl" or value.endswith(":nccl") or ":nccl," in value


# vLLM attention backends that are CUDA kernels (AttentionBackendEnum members of vLLM 0.32.0; TORCH_SDPA,
# CPU_ATTN, FLEX_ATTENTION and the ROCm/XPU ones are not CUDA-bound).
_CUDA_ATTENTION_RE = re.compile(r"(FLASH_ATTN|FLASHINFER|FLASHMLA|TRITON|CUTLASS|XFORMERS|TOKENSPEED|TREE_ATTN)\w*")


def is_cuda_attention_backend(value: str) -> bool:
    return _CUDA_ATTENTION_RE.fullmatch(value.upper()) is not None


def is_unsupported_quantization(value: str) -> bool:
    """A quantization method vLLM knows that vllm-ascend refuses at its newest release: the same verdict
    `lint --quantization` gives (workbench.truth.capabilities: vLLM's parser choices and
    NPUPlatform.supported_quantization, read per tag)."""
    from workbench.truth.capabilities import unsupported_quantization
    from workbench.truth.table import config_table

    return unsupported_quantization(config_table(), value) is not None


def is_fp8_kv_cache(value: str) -> bool:
    return value.lower().startswith("fp8")


# vLLM option names (Python keywords / YAML keys, with '-' read as '_') and what they tie to.
CUDAGRAPH_OPTIONS = frozenset(
    (
        "cudagraph_mode cudagraph_capture_sizes cuda_graph_sizes max_cudagraph_capture_size "
        "cudagraph_num_of_warmups full_cuda_graph use_cudagraph max_seq_len_to_capture"
    ).split()
)


def option_rule(name: str, value: str | None) -> Rule | None:
    """The rule for a vLLM option set to `value` (None when the value is not a literal), or None."""
    key = name.lstrip("-").replace("-", "_").lower()
    if key in CUDAGRAPH_OPTIONS:
        return Rule.VLLM_CUDAGRAPH_OPTION
    if value is None:
        return None
    if key == "attention_backend" and is_cuda_attention_backend(value):
        return Rule.VLLM_ATTENTION_BACKEND
    if key == "quantization" and is_unsupported_quantization(value):
        return Rule.VLLM_QUANTIZATION
    if key in ("kv_cache_dtype", "cache_dtype") and is_fp8_kv_cache(value):
        return Rule.VLLM_KV_CACHE_FP8
    if key == "device" and is_cuda_device(value):
        return Rule.DEVICE_CUDA_STRING
    return None


# -- native code, binaries, containers -------------------------------------------------------------
# CUDA shared libraries a compiled extension may link or dlopen.
CUDA_LIBRARY_RE = re.compile(
    r"lib(?:cudart|cuda|cublasLt|cublas|cudnn|nccl|nvrtc|cufft|curand|cusparse|cusolver|nvToolsExt|nvidia-ml)\.so"
)
CUDA_LIBRARY_BYTES_RE = re.compile(CUDA_LIBRARY_RE.pattern.encode())
# Container images built on CUDA (the names NVIDIA, PyTorch and vLLM publish).
CUDA_IMAGE_RE = re.compile(
    r"(?:docker\.io/)?nvidia/cuda[\w.:/-]*|nvcr\.io/nvidia/[\w.:/-]+|(?:docker\.io/)?vllm/vllm-openai[\w.:-]*"
    r"|(?:docker\.io/)?pytorch/pytorch:[\w.-]*cuda[\w.-]*"
)
