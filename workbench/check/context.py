"""What the checks look at: the machine's inputs (`workbench.stack.context.MachineContext`) plus what
the checks alone need, in one frozen object passed to every check.

Tests point a check at a fake `/usr/local/Ascend` tree, a fake `npu-smi` on PATH or a probe child that
segfaults, without touching the real machine. The environment is a snapshot taken once: checks never
read `os.environ`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.settings import recipes_dir
from workbench.stack.context import MachineContext


def default_matrix_files() -> tuple[Path, ...]:
    """Every shipped verified-combination table, `recipes/matrices/*.yaml`, in name order."""
    return tuple(sorted((recipes_dir() / "matrices").glob("*.yaml")))


@dataclass(frozen=True)
class CheckContext(MachineContext):
    """Inputs of one pre-flight run: the machine's (see MachineContext), and

    matrix_files       verified-combination YAML files to match the installed stack against
    probe_command      child command of the device-initialisation probe; None = the torch_npu probe
    probe_timeout_s    a probe child running longer than this is a hang and is killed
    run_probe          False skips the device probe (it costs a CANN initialisation, ~10-30 s)
    source_checkouts   vllm / vllm-ascend source trees to test for importability
    gpu_memory_utilization  the fraction of device memory the server will ask for; HBM already used
                       beyond 1 - this makes vLLM refuse to start
    server_url         an OpenAI-compatible server to send the checklist's one small request to
    """

    matrix_files: tuple[Path, ...] = field(default_factory=default_matrix_files)
    probe_command: tuple[str, ...] | None = None
    probe_timeout_s: float = 90.0
    run_probe: bool = True
    source_checkouts: tuple[Path, ...] = ()
    gpu_memory_utilization: float = 0.85
    server_url: str | None = None

    @classmethod
    def from_environment(  # type: ignore[override]
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        ascend_root: Path | str | None = None,
        matrix_files: tuple[Path, ...] | list[Path] | None = None,
        **options: Any,
    ) -> CheckContext:
        """A context for this process's environment (or `environ`); every matrix file when none is given."""
        files = tuple(Path(p) for p in matrix_files) if matrix_files else default_matrix_files()
        if "source_checkouts" in options:  # notebooks pass a list of strings
            options["source_checkouts"] = tuple(Path(str(p)).expanduser() for p in options["source_checkouts"] or ())
        return super().from_environment(environ, ascend_root=ascend_root, matrix_files=files, **options)
