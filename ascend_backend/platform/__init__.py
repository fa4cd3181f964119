"""What this machine is and which NPU kernel each op would run on it: the layer below the op registry.

    kinds      DeviceKind, NpuUnavailable, NpuStatus: importable without torch
    device     the device probe: npu, cuda or cpu; the one `import torch_npu`, its failure classified
    kernels    the kernel-selection table (per vllm-ascend release, chip, graph mode) and its context

Layers, bottom up: kinds; device; kernels (asks device for the machine's facts). Nothing here imports the
registry, an op or an adapter: the registry asks this package which device a tensor is on and whether
torch_npu works, and the NPU adapters (`ascend_backend.npu`, above the native ops) ask it which recipe to
run. Importing this package imports nothing, so `import ascend_backend.platform.kinds` stays torch-free.
"""
