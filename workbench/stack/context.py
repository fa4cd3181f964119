"""What the stack readers look at: one frozen description of the machine's inputs.

Everything a reader takes from outside (environment variables, the Ascend install root, where
`npu-smi` is, /dev and /dev/shm) comes from here, so tests point a reader at a fake `/usr/local/Ascend`
tree or a fake `npu-smi` on PATH without touching the real machine. The environment is a snapshot
taken once: readers never read `os.environ`. The pre-flight's `CheckContext` extends it with what the
checks alone need (matrix files, the device probe, a server URL).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

ASCEND_ROOT_ENV = "ASCEND_WORKBENCH_ASCEND_ROOT"  # where CANN, driver and firmware are installed
DEFAULT_ASCEND_ROOT = Path("/usr/local/Ascend")

C = TypeVar("C", bound="MachineContext")


@dataclass(frozen=True)
class MachineContext:
    """Inputs of the machine readers.

    environ            the environment read (a read-only snapshot; subprocesses get exactly this)
    ascend_root        CANN / driver / firmware install root (default /usr/local/Ascend)
    dev_dir            where device nodes live (/dev); `davinci_manager` there marks an NPU machine
    shm_path           the shared-memory mount vLLM's workers talk through
    npu_smi            command name or path of npu-smi, looked up on environ's PATH
    command_timeout_s  limit for each helper command (npu-smi, cmake --version ...)
    """

    environ: Mapping[str, str]
    ascend_root: Path = DEFAULT_ASCEND_ROOT
    dev_dir: Path = Path("/dev")
    shm_path: Path = Path("/dev/shm")
    npu_smi: str = "npu-smi"
    command_timeout_s: float = 10.0

    @classmethod
    def from_environment(
        cls: type[C],
        environ: Mapping[str, str] | None = None,
        *,
        ascend_root: Path | str | None = None,
        **options: Any,
    ) -> C:
        """A context for this process's environment (or `environ`), with the Ascend root taken from
        the argument, else $ASCEND_WORKBENCH_ASCEND_ROOT, else /usr/local/Ascend."""
        env = MappingProxyType(dict(os.environ if environ is None else environ))
        root = Path(ascend_root or env.get(ASCEND_ROOT_ENV) or DEFAULT_ASCEND_ROOT)
        return cls(environ=env, ascend_root=root, **options)

    def which(self, command: str) -> str | None:
        """Full path of `command` on this context's PATH (not the test runner's)."""
        return shutil.which(command, path=self.environ.get("PATH", os.defpath))

    def subprocess_env(self) -> dict[str, str]:
        return dict(self.environ)
