"""Every rule has a line that triggers it and a near miss that must not (the table below), and every
rule of the scanner appears in the table."""

from __future__ import annotations

import pytest

from tests.unit.workbench.scan.conftest import rules_of
from workbench.scan.rule_ids import Rule

ELF = b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 56

# rule -> (file name, trigger, near miss); a near miss may name its own file as (name, content).
CASES: dict[Rule, tuple] = {
    Rule.TORCH_CUDA_API: ("m.py", "import torch\ntorch.cuda.synchronize()\n", "import torch\ntorch.npu.synchronize()\n"),
    Rule.TORCH_CUDA_UNMAPPED: ("m.py", "import torch\nerr = torch.cuda.OutOfMemoryError\n", "import torch\nerr = torch.OutOfMemoryError\n"),
    Rule.TORCH_CUDA_CAPABILITY: ("m.py", "import torch\nmajor, minor = torch.cuda.get_device_capability()\n", "import torch\nname = torch.npu.get_device_name(0)\n"),
    Rule.TORCH_CUDA_NVTX: ("m.py", "import torch\ntorch.cuda.nvtx.range_push('fwd')\n", "import torch\ntorch.profiler.record_function('fwd')\n"),
    Rule.TENSOR_CUDA_METHOD: ("m.py", "def f(x):\n    return x.cuda()\n", "def f(args):\n    return args.cuda\n"),
    Rule.DEVICE_CUDA_STRING: ("m.py", "import torch\nx = torch.zeros(2, device='cuda:0')\n", "import logging\nlogging.info('no cuda here: running on the npu')\n"),
    Rule.DEVICE_STRING_COMPARE: ("m.py", "def f(t):\n    return t.device.type == 'cuda'\n", "def f(t):\n    return t.device.type == 'npu'\n"),
    Rule.AMP_CUDA: ("m.py", "import torch\nwith torch.autocast('cuda'):\n    pass\n", "import torch\nwith torch.autocast('cpu'):\n    pass\n"),
    Rule.BACKENDS_CUDNN: ("m.py", "import torch\ntorch.backends.cudnn.benchmark = True\n", "import torch\ntorch.backends.mkldnn.enabled = True\n"),
    Rule.BACKENDS_TF32: ("m.py", "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n", "import torch\ntorch.set_float32_matmul_precision('high')\n"),
    Rule.BACKENDS_SDP: ("m.py", "import torch\ntorch.backends.cuda.enable_flash_sdp(True)\n", "import torch.nn.functional as F\ny = F.scaled_dot_product_attention(q, k, v)\n"),
    Rule.BACKENDS_CUDA_OTHER: ("m.py", "import torch\ntorch.backends.cuda.preferred_linalg_library('cusolver')\n", "import torch\ntorch.backends.cpu.get_cpu_capability()\n"),
    Rule.CUDA_GRAPH_CAPTURE: ("m.py", "import torch\ng = torch.cuda.CUDAGraph()\n", "import torch\ng = torch.compile(model)\n"),
    Rule.VLLM_CUDAGRAPH_OPTION: ("m.py", "from vllm import LLM\nLLM(model='m', cudagraph_capture_sizes=[1, 2])\n", "from vllm import LLM\nLLM(model='m', enforce_eager=True)\n"),
    Rule.NCCL_BACKEND: ("m.py", "import torch.distributed as dist\ndist.init_process_group(backend='nccl')\n", "import torch.distributed as dist\ndist.init_process_group(backend='gloo')\n"),
    Rule.NCCL_LIBRARY: ("m.py", "import torch\ntorch.cuda.nccl.all_reduce(xs)\n", "import torch\ntorch.distributed.all_reduce(x)\n"),
    Rule.ENV_NCCL: ("m.py", "import os\nos.environ['NCCL_SOCKET_IFNAME'] = 'eth0'\n", "import os\nos.environ['HCCL_SOCKET_IFNAME'] = 'eth0'\n"),
    Rule.EXT_CUDA_EXTENSION: ("setup.py", "from torch.utils.cpp_extension import CUDAExtension\next = CUDAExtension('x', ['x.cu'])\n", "from torch.utils.cpp_extension import CppExtension\next = CppExtension('x', ['x.cpp'])\n"),
    Rule.EXT_CUDA_DISPATCH: ("m.py", "import torch\n@torch.library.impl('lib::op', 'CUDA')\ndef op(x):\n    return x\n", "import torch\n@torch.library.impl('lib::op', 'CPU')\ndef op(x):\n    return x\n"),
    Rule.EXT_LOAD_LIBRARY: ("m.py", "import torch\ntorch.ops.load_library('build/libops.so')\n", "import torch\ny = torch.ops.mylib.op(x)\n"),
    Rule.TRITON_KERNEL: ("m.py", "import triton\n@triton.jit\ndef k(x):\n    pass\n", "import torch\n@torch.jit.script\ndef k(x):\n    return x\n"),
    Rule.LIB_TRITON: ("m.py", "import triton\n", "import triton_ascend\n"),
    Rule.LIB_FLASH_ATTN: ("m.py", "from flash_attn import flash_attn_func\n", "from torch_npu import npu_fusion_attention\n"),
    Rule.LIB_XFORMERS: ("m.py", "import xformers.ops as xops\n", "import xformer_utils\n"),
    Rule.LIB_FLASHINFER: ("m.py", "import flashinfer\n", "import flashinference_tools\n"),
    Rule.LIB_BITSANDBYTES: ("m.py", "import bitsandbytes as bnb\n", "import bitstring\n"),
    Rule.LIB_APEX: ("m.py", "from apex.normalization import FusedRMSNorm\n", "from apexcharts import Chart\n"),
    Rule.LIB_DEEPSPEED_OPS: ("m.py", "from deepspeed.ops.adam import FusedAdam\n", "import deepspeed\n"),
    Rule.LIB_CUPY: ("m.py", "import cupy as cp\n", "import numpy as np\n"),
    Rule.LIB_NVML: ("m.py", "import pynvml\n", "import psutil\n"),
    Rule.LIB_CUDA_BINDINGS: ("m.py", "from cuda import cudart\n", "from torch import cuda\n"),
    Rule.LIB_TENSORRT: ("m.py", "import tensorrt as trt\n", "import tensorboard\n"),
    Rule.LIB_CUDA_KERNELS: ("m.py", "import deep_gemm\n", "import deepmerge\n"),
    Rule.LIB_VLLM_CUDA_OPS: ("m.py", "from vllm import _custom_ops as ops\n", "from vllm import LLM\n"),
    Rule.DTYPE_FP8: ("m.py", "import torch\nw = w.to(torch.float8_e4m3fn)\n", "import torch\nw = w.to(torch.int8)\n"),
    Rule.VLLM_ATTENTION_BACKEND: ("m.py", "import os\nos.environ['VLLM_ATTENTION_BACKEND'] = 'FLASHINFER'\n", "from vllm import LLM\nLLM(model='m', attention_backend='TORCH_SDPA')\n"),
    Rule.VLLM_QUANTIZATION: ("m.py", "from vllm import LLM\nLLM(model='m', quantization='awq')\n", "from vllm import LLM\nLLM(model='m', quantization='ascend')\n"),
    Rule.VLLM_KV_CACHE_FP8: ("m.py", "from vllm import LLM\nLLM(model='m', kv_cache_dtype='fp8')\n", "from vllm import LLM\nLLM(model='m', kv_cache_dtype='auto')\n"),
    Rule.VLLM_CUDA_ENV: ("m.py", "import os\nos.environ['VLLM_USE_FLASHINFER_SAMPLER'] = '1'\n", "import os\nos.environ['VLLM_ASCEND_ENABLE_MLAPO'] = '1'\n"),
    Rule.ENV_CUDA_VISIBLE_DEVICES: ("m.py", "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0,1'\n", "import os\nos.environ['ASCEND_RT_VISIBLE_DEVICES'] = '0,1'\n"),
    Rule.ENV_NVIDIA_CONTAINER: ("run.sh", "export NVIDIA_VISIBLE_DEVICES=all\n", "export ASCEND_VISIBLE_DEVICES=0\n"),
    Rule.ENV_CUDA_LAUNCH_BLOCKING: ("run.sh", "CUDA_LAUNCH_BLOCKING=1 python serve.py\n", "ASCEND_LAUNCH_BLOCKING=1 python serve.py\n"),
    Rule.ENV_CUDA_ALLOC_CONF: ("run.sh", "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n", "export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True\n"),
    Rule.ENV_CUDA_TOOLKIT: ("run.sh", "export CUDA_HOME=/usr/local/cuda\n", "source /usr/local/Ascend/ascend-toolkit/set_env.sh\n"),
    Rule.ENV_CUDA_OTHER: ("run.sh", "export CUDA_DEVICE_MAX_CONNECTIONS=1\n", "export OMP_NUM_THREADS=1\n"),
    Rule.TOOL_NVIDIA_SMI: ("run.sh", "nvidia-smi --query-gpu=memory.used --format=csv\n", "npu-smi info\n"),
    Rule.DEPS_CUDA_WHEEL: ("requirements.txt", "torch==2.3.1+cu121\n", "torch==2.3.1\n"),
    Rule.DEPS_NVIDIA_PACKAGE: ("requirements.txt", "nvidia-cublas-cu12==12.1.3.1\n", "nvidia-ml-py==12.535\n"),
    Rule.DEPS_VLLM_WHEEL: ("requirements.txt", "vllm==0.6.3\n", "vllm-ascend==0.9.1\n"),
    Rule.DOCKER_CUDA_BASE: ("Dockerfile", "FROM nvidia/cuda:12.1.1-devel-ubuntu22.04\n", "FROM quay.io/ascend/vllm-ascend:v0.9.1\n"),
    Rule.DOCKER_GPU_RUNTIME: ("run.sh", "docker run --gpus all image\n", "docker run --device /dev/davinci0 image\n"),
    Rule.K8S_GPU_RESOURCE: ("pod.yaml", "resources:\n  limits:\n    nvidia.com/gpu: 1\n", "resources:\n  limits:\n    huawei.com/Ascend910: 1\n"),
    # vllm-project/production-stack helm/values.yaml@a6c01db0: runtimeClassName, MIG and HAMi resources, LMCache image
    Rule.K8S_RUNTIME_CLASS: ("values.yaml", 'servingEngineSpec:\n  runtimeClassName: "nvidia"\n', 'servingEngineSpec:\n  runtimeClassName: ""\n'),
    Rule.K8S_GPU_SHARING: ("_helpers.tpl", '  nvidia.com/gpumem: {{ .requestGPUMem | quote }}\n', '  nvidia.com/gpu: 1\n'),
    Rule.KV_CACHE_CUDA_IMAGE: ("values.yaml", 'repository: "lmcache/vllm-openai"\n', 'repository: "lmcache/lmstack-router"\n'),
    # production-stack tutorials/assets/values-16-disagg-prefill.yaml@a6c01db0: a NIXL buffer on the GPU
    Rule.TRANSPORT_CUDA: ("values.yaml", 'nixlBufferDevice: "cuda"\n', 'nixlBufferDevice: "cpu"\n'),
    Rule.NATIVE_CUDA_SOURCE: ("k.cu", "__global__ void add(float* x) {}\n", ("k.cpp", "void add(float* x) {}\n")),
    Rule.NATIVE_CUDA_API: ("ops.cpp", "#include <cuda_runtime.h>\n", "#include <acl/acl.h>\n"),
    Rule.NATIVE_CUDA_BUILD: ("CMakeLists.txt", "enable_language(CUDA)\n", "enable_language(CXX)\n"),
    Rule.NATIVE_CUDA_BINARY: ("libops.so", ELF + b"libcudart.so.12\x00", ELF + b"libascendcl.so\x00"),
    Rule.UNRESOLVED_DEVICE: ("m.py", "import torch\ndef f(kind, rank):\n    return torch.device(f'{kind}:{rank}')\n", "import torch\ndef f(rank):\n    return torch.device(f'npu:{rank}')\n"),
    Rule.UNRESOLVED_BACKEND: ("m.py", "import os\nimport torch.distributed as dist\ndist.init_process_group(backend=os.environ['PG'])\n", "import torch.distributed as dist\ndist.init_process_group(backend='hccl')\n"),
    Rule.UNRESOLVED_IMPORT: ("m.py", "import importlib\ndef load(name):\n    return importlib.import_module(name)\n", "import importlib\njson = importlib.import_module('json')\n"),
}  # fmt: skip


def test_every_rule_has_a_trigger_and_a_near_miss():
    assert set(CASES) == set(Rule), f"rules without a case: {sorted(r.value for r in set(Rule) - set(CASES))}"


@pytest.mark.parametrize("rule", list(CASES), ids=[r.value for r in CASES])
def test_trigger_fires(rule, scan_snippet):
    name, trigger, _ = CASES[rule]
    report = scan_snippet(name, trigger)
    assert rule.value in rules_of(report), f"{rule.value} not found in {name}: {report.findings}"
    assert report.problems == ()


@pytest.mark.parametrize("rule", list(CASES), ids=[r.value for r in CASES])
def test_near_miss_does_not_fire(rule, scan_snippet):
    name, _, near_miss = CASES[rule]
    if isinstance(near_miss, tuple):
        name, near_miss = near_miss
    report = scan_snippet(name, near_miss)
    assert rule.value not in rules_of(report), [f for f in report.findings if f.rule == rule.value]
    assert report.problems == ()
