"""torch's autoload of torch_npu, made survivable: a broken CANN install becomes a diagnosis, not a dead `import torch`.

torch (2.5+) imports every package registered under the entry-point group `torch.backends` inside
`import torch` (torch/__init__.py `_import_device_backends`); torch_npu registers itself there
(`torch_npu = torch_npu:_autoload`). When torch_npu cannot load (CANN's set_env.sh not sourced:
"libascendcl.so: cannot open shared object file"; the driver not mounted: "libascend_hal.so ..."), torch
raises "Failed to load the backend extension: torch_npu" from inside its own import, and torch cannot be
imported again in that process: the half-initialised modules stay registered. Nothing after that point can
classify anything (vllm-ascend #1440 shows the bare error).

`install()` (run by `import ascend_backend` and `import workbench`, torch-free and cheap) puts a one-shot
finder in front of the import system. When `torch` is imported, torch itself loads with the autoload
switched off (TORCH_DEVICE_BACKEND_AUTOLOAD=0 for the duration of its own import, then restored), and the
backends are loaded the way torch loads them, right after: each entry point loaded and called. A torch_npu
that fails there is recorded (`failure()`: the traceback text), torch stays usable on the CPU, and the device
probe (`ascend_backend.platform.device`) classifies the text ("source set_env.sh", "mount the driver")
instead of importing torch_npu a second time. Any other backend that fails raises torch's own error, as
torch would. Where torch was imported before (a vLLM worker, a script importing torch first) or the
autoload is off, nothing changes.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import traceback
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ascend_backend import envs

AUTOLOAD_VAR = "TORCH_DEVICE_BACKEND_AUTOLOAD"
ENTRY_POINT_GROUP = "torch.backends"


@dataclass
class _AutoloadRecord:
    """The process's one record of a torch_npu autoload that failed (process state, like the import system)."""

    failure: str | None = None


_RECORD = _AutoloadRecord()


def failure() -> str | None:
    """The traceback of torch_npu's autoload failure in this process, or None (none tried, or it loaded)."""
    return _RECORD.failure


def _entry_points() -> list[Any]:
    from importlib.metadata import entry_points

    return list(entry_points(group=ENTRY_POINT_GROUP))


def _is_torch_npu(entry: Any) -> bool:
    return entry.name == "torch_npu" or str(entry.value).split(":", 1)[0].split(".", 1)[0] == "torch_npu"


def _restore(saved: str | None) -> None:
    if saved is None:
        os.environ.pop(AUTOLOAD_VAR, None)
    else:
        os.environ[AUTOLOAD_VAR] = saved


def load_backends(saved: str | None) -> None:
    """What torch's `_import_device_backends` does, except that a failing torch_npu is recorded, not raised.

    `saved` is the switch's value before torch's import; torch_npu sets it to "0" while it imports and its
    entry point restores it, so a failure leaves it restored here (child processes see what the user set).
    """
    for entry in _entry_points():
        try:
            entry.load()()
        except Exception as err:  # noqa: BLE001 - the failure is what the probe classifies
            if not _is_torch_npu(entry):
                raise RuntimeError(
                    f"Failed to load the backend extension: {entry.name}. "
                    f"You can disable extension auto-loading with {AUTOLOAD_VAR}=0."
                ) from err
            _RECORD.failure = "".join(traceback.format_exception(err))
            _restore(saved)


class _GuardedTorchLoader(importlib.abc.Loader):
    """torch's own loader, run with the autoload off; the backends are loaded after, by `load_backends`."""

    def __init__(self, loader: importlib.abc.Loader, finder: _TorchImportGuard) -> None:
        self._loader = loader
        self._finder = finder

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._finder.remove()
        saved = os.environ.get(AUTOLOAD_VAR)
        os.environ[AUTOLOAD_VAR] = "0"
        try:
            self._loader.exec_module(module)
        finally:
            _restore(saved)
        load_backends(saved)

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, is_package, get_source, ...
        return getattr(self._loader, name)


class _TorchImportGuard(importlib.abc.MetaPathFinder):
    """A finder for `torch` only, first on sys.meta_path until torch is imported."""

    def __init__(self) -> None:
        self._npu_entry: bool | None = None  # a torch_npu entry point is installed (read once)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "torch" or not envs.TORCH_DEVICE_BACKEND_AUTOLOAD:
            return None
        if self._npu_entry is None:
            self._npu_entry = any(_is_torch_npu(e) for e in _entry_points())
        if not self._npu_entry:
            self.remove()  # no torch_npu to autoload here, now or later in this process
            return None
        index = sys.meta_path.index(self)
        for finder in sys.meta_path[index + 1 :]:
            spec = finder.find_spec(fullname, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None and spec.loader is not None:
                spec.loader = _GuardedTorchLoader(spec.loader, self)
                return spec
        return None

    def remove(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def install() -> None:
    """Guard the first `import torch` of this process (a no-op once torch is imported or a guard is in place)."""
    if "torch" in sys.modules or any(isinstance(f, _TorchImportGuard) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _TorchImportGuard())


__all__ = ["AUTOLOAD_VAR", "failure", "install", "load_backends"]
