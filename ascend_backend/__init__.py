"""ascend_backend: the pieces a vLLM hardware backend needs, for Ascend NPUs with native fallbacks.

    import ascend_backend
    ascend_backend.registry.describe()        # which implementation each op uses here, and why
    ascend_backend.ops.rms_norm(x, w, 1e-6)   # torch_npu kernel on an NPU, native PyTorch elsewhere

Importing the package registers every op. It never imports `workbench` (a test enforces this).
"""

import importlib.util as _importlib_util

from ascend_backend import device, envs, ops, registry
from ascend_backend.registry import REGISTRY

# The attention kernels register themselves too; the package is optional while it is being built.
if _importlib_util.find_spec("ascend_backend.attention") is not None:
    from ascend_backend import attention  # noqa: F401

__version__ = "0.1.0"
__all__ = ["REGISTRY", "device", "envs", "ops", "registry"]
