"""`read_profile(path)`: any supported profile directory or file -> one `Profile`.

The format is detected (`workbench.profiling.detect`), the matching reader runs, and a profile whose
files are there but hold no step at all is still returned — its notes say what was missing and the
verdicts say NO_SHARES — so an op table alone is not thrown away.
"""

from __future__ import annotations

from pathlib import Path

from workbench.profiling import ascend_steps
from workbench.profiling.detect import Detection, Found, detect
from workbench.profiling.msprof import read_msprof
from workbench.profiling.profile import NPU_MAPPING, Profile, ProfileFormat
from workbench.profiling.torch_npu import read_torch_npu
from workbench.profiling.torch_trace import read_torch_traces


def read_cluster(detection: Detection) -> Profile:
    """msprof-analyze's cluster_step_trace_time.csv (or a lone step_trace_time.csv): shares per rank only."""
    tables = [ascend_steps.steps_from_table(path, "0") for path in detection.files]
    steps = [s for found, _ in tables for s in found]
    notes = (
        "per-rank shares only: msprof-analyze's cluster table has no op list (run `profile` on the ranks' "
        "*_ascend_pt directories for the top ops)",
    )
    return Profile(
        str(detection.root),
        ProfileFormat.TORCH_NPU,
        "npu",
        NPU_MAPPING,
        tuple(steps),
        (),
        (),
        notes,
        all(whole for _, whole in tables),
    )


def read_profile(path: Path | str) -> Profile:
    """Detect and read `path` (see the module docstring)."""
    detection = detect(path)
    if detection.kind is Found.TORCH_NPU:
        return read_torch_npu(detection.root)
    if detection.kind is Found.MSPROF:
        return read_msprof(detection.root)
    if detection.kind is Found.CLUSTER:
        return read_cluster(detection)
    return read_torch_traces(detection.files, detection.root)
