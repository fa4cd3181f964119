"""Every rule the scanner can report, by id. The mapping table (policy/scan/cuda-mapping.yaml) has one
row per member, and a test keeps the two in step: a rule without a row, or a row without a rule, fails.

Ids are `family.name`; the family is only for reading, the category comes from the mapping row.
"""

from __future__ import annotations

import enum


class Rule(str, enum.Enum):
    # torch.cuda and CUDA tensors (Python)
    TORCH_CUDA_API = "torch_cuda.api"
    TORCH_CUDA_UNMAPPED = "torch_cuda.unmapped"
    TORCH_CUDA_CAPABILITY = "torch_cuda.capability"
    TORCH_CUDA_NVTX = "torch_cuda.nvtx"
    TENSOR_CUDA_METHOD = "tensor.cuda_method"
    # devices
    DEVICE_CUDA_STRING = "device.cuda_string"
    DEVICE_STRING_COMPARE = "device.string_compare"
    # mixed precision
    AMP_CUDA = "amp.cuda"
    # torch.backends
    BACKENDS_CUDNN = "backends.cudnn"
    BACKENDS_TF32 = "backends.tf32"
    BACKENDS_SDP = "backends.sdp"
    BACKENDS_CUDA_OTHER = "backends.cuda_other"
    # graphs
    CUDA_GRAPH_CAPTURE = "cuda_graph.capture"
    VLLM_CUDAGRAPH_OPTION = "vllm.cudagraph_option"
    # distributed
    NCCL_BACKEND = "nccl.backend"
    NCCL_LIBRARY = "nccl.library"
    ENV_NCCL = "env.nccl"
    # extensions and custom ops
    EXT_CUDA_EXTENSION = "ext.cuda_extension"
    EXT_CUDA_DISPATCH = "ext.cuda_dispatch"
    EXT_LOAD_LIBRARY = "ext.load_library"
    # triton
    TRITON_KERNEL = "triton.kernel"
    LIB_TRITON = "lib.triton"
    # CUDA-only libraries (imports and requirements)
    LIB_FLASH_ATTN = "lib.flash_attn"
    LIB_XFORMERS = "lib.xformers"
    LIB_FLASHINFER = "lib.flashinfer"
    LIB_BITSANDBYTES = "lib.bitsandbytes"
    LIB_APEX = "lib.apex"
    LIB_DEEPSPEED_OPS = "lib.deepspeed_ops"
    LIB_CUPY = "lib.cupy"
    LIB_NVML = "lib.nvml"
    LIB_CUDA_BINDINGS = "lib.cuda_bindings"
    LIB_TENSORRT = "lib.tensorrt"
    LIB_CUDA_KERNELS = "lib.cuda_kernels"
    LIB_VLLM_CUDA_OPS = "lib.vllm_cuda_ops"
    # dtypes
    DTYPE_FP8 = "dtype.fp8"
    # vLLM options and env vars
    VLLM_ATTENTION_BACKEND = "vllm.attention_backend"
    VLLM_QUANTIZATION = "vllm.quantization"
    VLLM_KV_CACHE_FP8 = "vllm.kv_cache_fp8"
    VLLM_CUDA_ENV = "vllm.cuda_env"
    # process environment
    ENV_CUDA_VISIBLE_DEVICES = "env.cuda_visible_devices"
    ENV_NVIDIA_CONTAINER = "env.nvidia_container"
    ENV_CUDA_LAUNCH_BLOCKING = "env.cuda_launch_blocking"
    ENV_CUDA_ALLOC_CONF = "env.cuda_alloc_conf"
    ENV_CUDA_TOOLKIT = "env.cuda_toolkit"
    ENV_CUDA_OTHER = "env.cuda_other"
    # tools
    TOOL_NVIDIA_SMI = "tool.nvidia_smi"
    # dependencies
    DEPS_CUDA_WHEEL = "deps.cuda_wheel"
    DEPS_NVIDIA_PACKAGE = "deps.nvidia_package"
    DEPS_VLLM_WHEEL = "deps.vllm_wheel"
    # containers and clusters
    DOCKER_CUDA_BASE = "docker.cuda_base"
    DOCKER_GPU_RUNTIME = "docker.gpu_runtime"
    K8S_GPU_RESOURCE = "k8s.gpu_resource"
    # the orchestration layer: runtime classes, GPU sharing, KV-cache layers and transports
    K8S_RUNTIME_CLASS = "k8s.runtime_class"
    K8S_GPU_SHARING = "k8s.gpu_sharing"
    KV_CACHE_CUDA_IMAGE = "kv_cache.cuda_image"
    TRANSPORT_CUDA = "transport.cuda"
    # native code
    NATIVE_CUDA_SOURCE = "native.cuda_source"
    NATIVE_CUDA_API = "native.cuda_api"
    NATIVE_CUDA_BUILD = "native.cuda_build"
    NATIVE_CUDA_BINARY = "native.cuda_binary"
    # values the scan cannot resolve
    UNRESOLVED_DEVICE = "unresolved.device"
    UNRESOLVED_BACKEND = "unresolved.backend"
    UNRESOLVED_IMPORT = "unresolved.import"
