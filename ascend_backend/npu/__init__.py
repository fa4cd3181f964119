"""Everything that touches torch_npu or decides which NPU kernel runs; native code lives elsewhere.

    kinds      DeviceKind, NpuUnavailable, NpuStatus: importable without torch
    device     the device probe: npu, cuda or cpu; the one `import torch_npu`, its failure classified
    kernels    the kernel-selection table (per vllm-ascend release, chip, graph mode) and its code
    guard      `npu_op`: the one way an NPU implementation gets torch_npu and says when it can run
    adapters   every torch_npu adapter (norms, activations, rotary, attention), registered through the guard

Layers, bottom up: kinds; device; kernels (asks device for the machine's facts); guard (asks kernels and
device); adapters (through guard). Importing this package imports nothing, so `import
ascend_backend.npu.kinds` stays torch-free.
"""
