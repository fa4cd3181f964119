"""Which profiler wrote a directory, so `profile PATH` reads whatever an engineer brings.

    <name>_ascend_pt/ASCEND_PROFILER_OUTPUT/     torch_npu (vllm-ascend's /start_profile, analysed)
    PROF_*/mindstudio_profiler_output/           msprof export
    cluster_step_trace_time.csv                  msprof-analyze cluster output (per-rank shares only)
    *.pt.trace.json[.gz]                         torch.profiler (vLLM's profiler on CPU and CUDA)

When several are present the device-side one wins (torch_npu, msprof, cluster, then torch traces):
vLLM on Ascend also writes the API server's own CPU trace (`*.async_llm.*.pt.trace.json.gz`) next to the
workers' `*_ascend_pt` directories. An empty directory, a `*_ascend_pt` that was never analysed, a cut-off
file or a directory of something else each get one message naming what is missing.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.profiling import msprof, torch_npu

TRACE_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")
CLUSTER_FILE = "cluster_step_trace_time.csv"
FRONTEND_MARK = ".async_llm"  # vLLM's API-server (frontend) trace: not a worker rank


class Found(str, enum.Enum):
    TORCH_NPU = "torch_npu"
    MSPROF = "msprof"
    CLUSTER = "cluster"
    TORCH_TRACE = "torch_trace"


@dataclass(frozen=True)
class Detection:
    kind: Found
    root: Path
    files: tuple[Path, ...]  # the trace files (torch traces), else the format's directories


def is_trace_file(path: Path) -> bool:
    return path.name.endswith(TRACE_SUFFIXES)


def worker_traces(root: Path) -> list[Path]:
    """torch.profiler traces under `root`, frontend traces and *_ascend_pt contents left out."""
    if root.is_file():
        return [root]
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file()
        and is_trace_file(p)
        and FRONTEND_MARK not in p.name
        and not any(part.endswith("_ascend_pt") for part in p.parts)
    )


def _not_analysed(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*_ascend_pt") if p.is_dir() and not (p / torch_npu.OUTPUT_DIR).is_dir())


def detect(path: Path | str) -> Detection:
    """The format of `path` (a directory or one file); WorkbenchError naming what is missing otherwise."""
    root = Path(path).expanduser()
    if not root.exists():
        raise WorkbenchError(f"{root}: no such file or directory; give a profile directory (or a trace file)")
    if root.is_file():
        return _detect_file(root)
    if not any(root.iterdir()):
        raise WorkbenchError(
            f"{root}: the directory is empty; the profiler wrote nothing there (was the server "
            "started with --profiler-config and /stop_profile called?)"
        )
    if dirs := torch_npu.output_dirs(root):
        return Detection(Found.TORCH_NPU, root, tuple(dirs))
    if dirs := msprof.output_dirs(root):
        return Detection(Found.MSPROF, root, tuple(dirs))
    if clusters := sorted(root.rglob(CLUSTER_FILE)):
        return Detection(Found.CLUSTER, root, tuple(clusters))
    if traces := worker_traces(root):
        return Detection(Found.TORCH_TRACE, root, tuple(traces))
    if pending := _not_analysed(root):
        raise WorkbenchError(
            f"{pending[0]}: no {torch_npu.OUTPUT_DIR} inside; analyse it first: python -c "
            f"\"from torch_npu.profiler.profiler import analyse; analyse('{pending[0]}')\""
        )
    frontend = sorted(p.name for p in root.rglob(f"*{FRONTEND_MARK}*") if is_trace_file(p))
    hint = f" (only the API server's own trace {frontend[0]}: the workers wrote nothing)" if frontend else ""
    raise WorkbenchError(
        f"{root}: no profiler output found{hint}; expected *_ascend_pt/{torch_npu.OUTPUT_DIR}/ (torch_npu), "
        f"{msprof.OUTPUT_DIR}/ (msprof), {CLUSTER_FILE} (msprof-analyze) or *.pt.trace.json[.gz] (torch.profiler)"
    )


def _detect_file(path: Path) -> Detection:
    if is_trace_file(path) or path.suffix == ".json" or path.name.endswith(".json.gz"):
        if path.name == "trace_view.json" and path.parent.name == torch_npu.OUTPUT_DIR:
            return Detection(Found.TORCH_NPU, path.parent, (path.parent,))
        return Detection(Found.TORCH_TRACE, path, (path,))
    if path.name == CLUSTER_FILE or path.name == "step_trace_time.csv":
        return Detection(Found.CLUSTER, path, (path,))
    raise WorkbenchError(
        f"{path}: not a profile file; give the profile directory, a *.pt.trace.json[.gz] trace, or {CLUSTER_FILE}"
    )
