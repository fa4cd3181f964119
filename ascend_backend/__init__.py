"""ascend_backend: the pieces a vLLM hardware backend needs, for Ascend NPUs with native fallbacks.

    import ascend_backend
    ascend_backend.registry.describe()        # which implementation each op uses here, and why
    ascend_backend.ops.rms_norm(x, w, 1e-6)   # torch_npu kernel on an NPU, native PyTorch elsewhere

Importing the package loads nothing but its environment table (`envs`, for ASCEND_BACKEND_LOG_LEVEL) and
the guard of torch's autoload of torch_npu (`platform.autoload`, torch-free):
each attribute below is imported on first access, and the op registry imports every built-in op the
first time it is used (`registry.OpRegistry.load_builtin_ops`), so the table is always complete when
asked. Why lazy: a process that only names devices (`ascend_backend.platform.kinds`, torch-free) or reads
the KV-cache bookkeeping must not pay for torch. It never imports `workbench` (a test enforces this).
"""

import importlib as _importlib
import logging as _logging
import os as _os
import sys as _sys
from typing import TYPE_CHECKING, Any

from ascend_backend import envs
from ascend_backend.platform import autoload as _autoload

if TYPE_CHECKING:  # what the lazy attributes are, for type checkers
    from ascend_backend import attention, ops, registry
    from ascend_backend.platform import device
    from ascend_backend.registry import REGISTRY

# attribute -> module it is; `device` is the device probe, `ascend_backend.platform.device`.
_MODULES = {
    "attention": "ascend_backend.attention",
    "device": "ascend_backend.platform.device",
    "ops": "ascend_backend.ops",
    "registry": "ascend_backend.registry",
}


def __getattr__(name: str) -> Any:
    """`ascend_backend.registry`, `.ops`, `.attention`, `.device`, `.REGISTRY`: imported on first access."""
    if name == "REGISTRY":
        return _importlib.import_module("ascend_backend.registry").REGISTRY
    if name in _MODULES:
        module = _importlib.import_module(_MODULES[name])
        globals()[name] = module  # later accesses skip this function
        return module
    raise AttributeError(f"module 'ascend_backend' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULES, "REGISTRY"})


def _configure_logging() -> None:
    """Honour ASCEND_BACKEND_LOG_LEVEL. Untouched when unset: a library leaves logging to its host
    application. When set, the level applies and records go to stderr, so a vLLM worker's log shows
    them without any logging set-up in the host."""
    if "ASCEND_BACKEND_LOG_LEVEL" not in _os.environ:
        return
    logger = _logging.getLogger("ascend_backend")
    logger.setLevel(envs.ASCEND_BACKEND_LOG_LEVEL)
    if not any(getattr(h, "_ascend_backend", False) for h in logger.handlers):
        handler = _logging.StreamHandler(_sys.stderr)
        handler.setFormatter(_logging.Formatter("%(asctime)s ascend_backend %(levelname)s %(name)s: %(message)s"))
        handler._ascend_backend = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.propagate = False  # one line per record, not one more through the host's root handler


_configure_logging()  # levels are looked up at each record, so loggers created later obey it too
# Before anything imports torch: a torch_npu that torch's autoload cannot load becomes the device probe's
# diagnosis instead of an exception inside `import torch` (ascend_backend.platform.autoload).
_autoload.install()

__version__ = "0.1.0"
__all__ = ["REGISTRY", "attention", "device", "envs", "ops", "registry"]
