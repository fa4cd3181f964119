"""Everything that touches torch_npu or decides which NPU kernel runs; native code lives elsewhere.

    kinds      DeviceKind, NpuUnavailable, NpuStatus: importable without torch
    device     the device probe: npu, cuda or cpu; the one `import torch_npu`, its failure classified
    kernels    the kernel-selection table (per vllm-ascend release, chip, graph mode) and its code

Importing this package imports nothing: `import ascend_backend.npu.kinds` stays torch-free.
"""
