"""The NPU adapters: the torch_npu calls vllm-ascend makes, registered as each op's NPU implementation.

    guard      `npu_op`: the one way an NPU implementation gets torch_npu and says when it can run
    adapters   every torch_npu adapter (norms, activations, rotary, attention, W8A8), registered through the guard

This package sits above the native ops it adapts (`ascend_backend.ops`, `.attention`, `.quantization`) and
the registry; what the machine is and which kernel the table chooses live below them, in
`ascend_backend.platform`. Importing this package imports nothing; the registry imports `adapters` the
first time it is used.
"""
