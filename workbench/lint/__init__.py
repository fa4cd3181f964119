"""Lint what will be served against a vllm-ascend release before it is deployed.

    checkpoint   a quantized checkpoint (msmodelslim or compressed-tensors) against the loader of each release
                 (`lint_checkpoint`), from the cited capability table ascend_backend/data/quant_capabilities.json
"""
