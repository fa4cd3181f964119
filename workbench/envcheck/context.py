"""What the checks look at: one frozen description of the machine's inputs, passed to every check.

Everything a check reads from outside (environment variables, the Ascend install root, where `npu-smi`
is, which matrix files, the device probe's child command) comes from here, so tests point a check at a
fake `/usr/local/Ascend` tree, a fake `npu-smi` on PATH or a probe child that segfaults, without
touching the real machine. The environment is a snapshot taken once: checks never read `os.environ`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from workbench.settings import recipes_dir

ASCEND_ROOT_ENV = "ASCEND_WORKBENCH_ASCEND_ROOT"  # where CANN, driver and firmware are installed
DEFAULT_ASCEND_ROOT = Path("/usr/local/Ascend")


def default_matrix_files() -> tuple[Path, ...]:
    """Every shipped verified-combination table, `recipes/matrices/*.yaml`, in name order."""
    return tuple(sorted((recipes_dir() / "matrices").glob("*.yaml")))


@dataclass(frozen=True)
class CheckContext:
    """Inputs of one pre-flight run.

    environ            the environment under test (a read-only snapshot; subprocesses get exactly this)
    ascend_root        CANN / driver / firmware install root (default /usr/local/Ascend)
    matrix_files       verified-combination YAML files to match the installed stack against
    dev_dir            where device nodes live (/dev); `davinci_manager` there marks an NPU machine
    shm_path           the shared-memory mount vLLM's workers talk through
    npu_smi            command name or path of npu-smi, looked up on environ's PATH
    command_timeout_s  limit for each helper command (npu-smi, cmake --version ...)
    probe_command      child command of the device-initialisation probe; None = the torch_npu probe
    probe_timeout_s    a probe child running longer than this is a hang and is killed
    run_probe          False skips the device probe (it costs a CANN initialisation, ~10-30 s)
    source_checkouts   vllm / vllm-ascend source trees to test for importability
    gpu_memory_utilization  the fraction of device memory the server will ask for; HBM already used
                       beyond 1 - this makes vLLM refuse to start
    server_url         an OpenAI-compatible server to send the checklist's one small request to
    """

    environ: Mapping[str, str]
    ascend_root: Path = DEFAULT_ASCEND_ROOT
    matrix_files: tuple[Path, ...] = field(default_factory=default_matrix_files)
    dev_dir: Path = Path("/dev")
    shm_path: Path = Path("/dev/shm")
    npu_smi: str = "npu-smi"
    command_timeout_s: float = 10.0
    probe_command: tuple[str, ...] | None = None
    probe_timeout_s: float = 90.0
    run_probe: bool = True
    source_checkouts: tuple[Path, ...] = ()
    gpu_memory_utilization: float = 0.85
    server_url: str | None = None

    @classmethod
    def from_environment(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        ascend_root: Path | str | None = None,
        matrix_files: tuple[Path, ...] | list[Path] | None = None,
        **options: object,
    ) -> CheckContext:
        """A context for this process's environment (or `environ`), with the Ascend root taken from
        the argument, else $ASCEND_WORKBENCH_ASCEND_ROOT, else /usr/local/Ascend."""
        env = MappingProxyType(dict(os.environ if environ is None else environ))
        root = Path(ascend_root or env.get(ASCEND_ROOT_ENV) or DEFAULT_ASCEND_ROOT)
        files = tuple(Path(p) for p in matrix_files) if matrix_files else default_matrix_files()
        if "source_checkouts" in options:  # notebooks pass a list of strings
            options["source_checkouts"] = tuple(Path(str(p)).expanduser() for p in options["source_checkouts"] or ())
        return cls(environ=env, ascend_root=root, matrix_files=files, **options)  # type: ignore[arg-type]

    def which(self, command: str) -> str | None:
        """Full path of `command` on this context's PATH (not the test runner's)."""
        return shutil.which(command, path=self.environ.get("PATH", os.defpath))

    def subprocess_env(self) -> dict[str, str]:
        return dict(self.environ)
