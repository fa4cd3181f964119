"""One record of a profile, whatever wrote it: where each rank's step time went, and which ops took it.

Every reader (torch_npu's ASCEND_PROFILER_OUTPUT, msprof's mindstudio_profiler_output, torch.profiler
Chrome traces from vLLM on CPU or CUDA) produces a `Profile`:

- `steps`: per rank and step, the step time split four ways with msprof-analyze's columns
  (Computing / Communication(Not Overlapped) / Overlapped / Free; `workbench.profiling.intervals`);
- `ops`: per rank and op, calls and self time, with the kind of work (AI_CORE / AI_VECTOR_CORE /
  AI_CPU / MIX_AIC / HCCL on Ascend; aten / vLLM C++ op / collective / ... on CPU and CUDA);
- `host`: host phases where the trace shows them (vLLM's scopes: schedule, preprocess, forward,
  sample, ...; the gaps between engine steps);
- `device` and `mapping`: what "device" means for these numbers. On CPU the device is the worker's
  compute: ops inside the model forward, the logits and the sampler are Computing, collectives are
  Communication, the rest of each
  engine step is Free (host) time. Every report that shows shares shows this sentence with them.

Busy = Computing + Communication(Not Overlapped) = step - Free: the time the device did something.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.results.files import write_json


class ProfileFormat(str, enum.Enum):
    TORCH_NPU = "torch_npu"  # <name>_ascend_pt/ASCEND_PROFILER_OUTPUT/ (torch_npu.profiler, vllm-ascend)
    MSPROF = "msprof"  # PROF_*/mindstudio_profiler_output/ (msprof --export / msprof.py export)
    TORCH_TRACE = "torch_trace"  # *.pt.trace.json[.gz] (torch.profiler; vLLM's profiler on CPU and CUDA)


CPU_MAPPING = (
    "CPU: the 'device' is the worker's compute — ops inside the model forward, the logits and the sampler are "
    "Computing, collectives (tensor-parallel all-reduces) are Communication, the rest of each engine step is Free "
    "(host) time"
)
NPU_MAPPING = "NPU: device tasks are Computing (AI_CORE, AI_VECTOR_CORE, AI_CPU, MIX), HCCL tasks Communication"
CUDA_MAPPING = "CUDA: GPU kernels are Computing, NCCL kernels Communication, idle GPU time Free"


@dataclass(frozen=True)
class StepShare:
    """One rank's step, msprof-analyze's way (microseconds). `phase` is prefill/decode/mixed or ''.

    Where the trace says so (vLLM's step annotation, `torch_trace`): `gap_after_us`, the part of `free_us`
    after the step's own work, until the next step starts (the engine loop: scheduling, output
    processing); `prefills` / `decodes`, how many requests the step prefilled / decoded (a decode step
    gives each of its `decodes` requests one token, so decode-weighted means of steps estimate TPOT).
    """

    rank: str
    step: int
    start_us: float
    computing_us: float
    communication_not_overlapped_us: float
    overlapped_us: float
    free_us: float
    phase: str = ""
    gap_after_us: float = 0.0
    prefills: int = 0
    decodes: int = 0

    @property
    def total_us(self) -> float:
        """msprof-analyze's step time: Computing + Communication(Not Overlapped) + Free."""
        return self.computing_us + self.communication_not_overlapped_us + self.free_us

    @property
    def communication_us(self) -> float:
        return self.communication_not_overlapped_us + self.overlapped_us


@dataclass(frozen=True)
class OpStat:
    """One op on one rank: calls and total self time (microseconds); `kind` is the kind of work."""

    rank: str
    name: str
    kind: str
    calls: int
    self_us: float
    communication: bool = False


@dataclass(frozen=True)
class HostPhase:
    """Time a rank's host spent in one phase (a vLLM scope, or the gaps between engine steps)."""

    rank: str
    phase: str
    total_us: float
    calls: int


@dataclass(frozen=True)
class Profile:
    """Everything one profile directory (or one capture) says about where the time went."""

    source: str  # the directory or file read
    format: ProfileFormat
    device: str  # "npu" | "cpu" | "cuda"
    mapping: str  # what Computing/Communication/Free mean here (see the module docstring)
    steps: tuple[StepShare, ...]
    ops: tuple[OpStat, ...] = ()
    host: tuple[HostPhase, ...] = ()
    notes: tuple[str, ...] = ()  # what a reader could not find (e.g. no kernel_details.csv)
    whole_window: bool = False  # each StepShare covers a rank's whole profiled window (no step marks seen)
    meta: dict[str, Any] = field(default_factory=dict, compare=False)  # provenance, capture details

    @property
    def ranks(self) -> list[str]:
        return sorted({s.rank for s in self.steps}, key=_rank_key)

    def steps_frame(self) -> pd.DataFrame:
        """One row per rank and step, microseconds and shares of the step (busy = 1 - free share)."""
        rows = [{**asdict(s), "total_us": s.total_us, "communication_us": s.communication_us} for s in self.steps]
        frame = pd.DataFrame(rows, columns=[*STEP_COLUMNS, "total_us", "communication_us"])
        return _with_shares(frame)

    def ranks_frame(self) -> pd.DataFrame:
        """One row per rank: the sums over its steps and the shares of its total step time."""
        steps = self.steps_frame()
        if steps.empty:
            return _with_shares(pd.DataFrame(columns=["rank", "steps", *SUM_COLUMNS]))
        sums = steps.groupby("rank", sort=False)[SUM_COLUMNS].sum()
        sums.insert(0, "steps", steps.groupby("rank", sort=False).size())
        frame = sums.reset_index()
        frame = frame.iloc[sorted(range(len(frame)), key=lambda i: _rank_key(str(frame["rank"].iloc[i])))]
        return _with_shares(frame.reset_index(drop=True))

    def ops_frame(self, top: int | None = 20) -> pd.DataFrame:
        """Ops by total self time over all ranks (calls and time summed), with their share of op time."""
        frame = pd.DataFrame([asdict(o) for o in self.ops], columns=list(OpStat.__dataclass_fields__))
        if frame.empty:
            return frame.assign(share=pd.Series(dtype=float))
        grouped = frame.groupby(["name", "kind", "communication"], as_index=False)[["calls", "self_us"]].sum()
        grouped = grouped.sort_values("self_us", ascending=False, ignore_index=True)
        grouped["share"] = grouped["self_us"] / grouped["self_us"].sum()
        return grouped.head(top) if top else grouped

    def kinds_frame(self) -> pd.DataFrame:
        """Self time by kind of work, per rank, with its share of the rank's op time."""
        frame = pd.DataFrame([asdict(o) for o in self.ops], columns=list(OpStat.__dataclass_fields__))
        if frame.empty:
            return pd.DataFrame(columns=["rank", "kind", "calls", "self_us", "share"])
        grouped = frame.groupby(["rank", "kind"], as_index=False)[["calls", "self_us"]].sum()
        grouped["share"] = grouped["self_us"] / grouped.groupby("rank")["self_us"].transform("sum")
        return grouped.sort_values(["rank", "self_us"], ascending=[True, False], ignore_index=True)

    def host_frame(self) -> pd.DataFrame:
        """Host phases per rank, longest first."""
        frame = pd.DataFrame([asdict(h) for h in self.host], columns=list(HostPhase.__dataclass_fields__))
        return frame.sort_values(["rank", "total_us"], ascending=[True, False], ignore_index=True)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able record (what `profile --json` writes, with provenance in `meta`)."""
        return {
            "source": self.source,
            "format": self.format.value,
            "device": self.device,
            "mapping": self.mapping,
            "steps": [asdict(s) for s in self.steps],
            "ops": [asdict(o) for o in self.ops],
            "host": [asdict(h) for h in self.host],
            "notes": list(self.notes),
            "whole_window": self.whole_window,
            "meta": self.meta,
        }

    def write(self, path: Path) -> Path:
        """The profile as JSON, atomically (its `meta` carries the provenance stamp); `from_dict` reads it."""
        return write_json(Path(path), self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Profile:
        return cls(
            source=data["source"],
            format=ProfileFormat(data["format"]),
            device=data["device"],
            mapping=data["mapping"],
            steps=tuple(StepShare(**s) for s in data.get("steps", [])),
            ops=tuple(OpStat(**o) for o in data.get("ops", [])),
            host=tuple(HostPhase(**h) for h in data.get("host", [])),
            notes=tuple(data.get("notes", [])),
            whole_window=bool(data.get("whole_window", False)),
            meta=dict(data.get("meta", {})),
        )


STEP_COLUMNS = list(StepShare.__dataclass_fields__)
SUM_COLUMNS = [
    "computing_us",
    "communication_not_overlapped_us",
    "overlapped_us",
    "free_us",
    "total_us",
    "communication_us",
]


def _rank_key(rank: str) -> tuple[int, str]:
    return (int(rank), "") if rank.isdigit() else (1 << 30, rank)


def _with_shares(frame: pd.DataFrame) -> pd.DataFrame:
    """Add computing/communication/free/busy shares of total_us (0 when a step has no time)."""
    total = frame["total_us"].astype(float).where(frame["total_us"].astype(float) > 0)
    frame = frame.copy()
    frame["computing_share"] = (frame["computing_us"] / total).fillna(0.0)
    frame["communication_share"] = (frame["communication_not_overlapped_us"] / total).fillna(0.0)
    frame["overlapped_share"] = (frame["overlapped_us"] / total).fillna(0.0)
    frame["free_share"] = (frame["free_us"] / total).fillna(0.0)
    frame["busy_share"] = frame["computing_share"] + frame["communication_share"]
    return frame


def mapping_for(device: str) -> str:
    return {"cpu": CPU_MAPPING, "cuda": CUDA_MAPPING}.get(device, NPU_MAPPING)


def source_text(path: Path | str) -> str:
    return str(Path(path))
