"""ascend_backend: the pieces a vLLM hardware backend needs, for Ascend NPUs with native fallbacks.

    import ascend_backend
    ascend_backend.registry.describe()        # which implementation each op uses here, and why
    ascend_backend.ops.rms_norm(x, w, 1e-6)   # torch_npu kernel on an NPU, native PyTorch elsewhere

Importing the package registers every op. It never imports `workbench` (a test enforces this).
"""

import logging as _logging
import os as _os
import sys as _sys

from ascend_backend import attention, envs, ops, registry  # attention: registers its ops too
from ascend_backend.npu import adapters as _adapters  # noqa: F401  (registers the NPU adapters)
from ascend_backend.npu import device
from ascend_backend.registry import REGISTRY


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


_configure_logging()  # levels are looked up at each record, so loggers created above obey it too

__version__ = "0.1.0"
__all__ = ["REGISTRY", "attention", "device", "envs", "ops", "registry"]
