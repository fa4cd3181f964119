"""What a performance twin is asked to run: the load, the profiler window, the repeats (typed, checked once).

    PerfTwinRequest(side_a, side_b, workload=PerfWorkload(input_lens=(64, 256), output_len=32),
                    window=ProfileWindow(delay_steps=4, max_steps=32), repeats=2)

The load is the same on both sides: `num_prompts` requests per window, exact prompt lengths (one request
class per entry of `input_lens`, interleaved), exact output lengths (ignore_eos), `concurrency` in flight.
Each window runs it twice on a side's server: once unprofiled (the latencies judged) and once with the
profiler on for a bounded window — `delay_steps` engine steps after `/start_profile`, then at most
`max_steps` (vLLM's per-session `delay_iterations` / `max_iterations`, vllm/entrypoints/serve/profile/
api_router.py at 0.32) — whose trace splits the step into buckets, and whose latencies against the
unprofiled run's measure the profiler's own cost. Each side gets `1 + repeats` windows, alternating
A, B, A, B, ...: the repeats measure each side's run-to-run noise, the alternation spreads a machine's
drift over both sides.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.twin.sides import Side

MAX_WINDOWS = 64  # per side: an A/A study is a benchmark's job, not one run's


@dataclass(frozen=True)
class PerfWorkload:
    """The load every window sends (both sides alike); one request class per prompt length."""

    input_lens: tuple[int, ...] = (64, 256)
    output_len: int = 32
    num_prompts: int = 16
    concurrency: int = 8
    warmup_requests: int = 8
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.input_lens or min(self.input_lens) < 1:
            raise WorkbenchError(f"--input-len {list(self.input_lens)}: give one or more prompt lengths >= 1 token")
        if len(set(self.input_lens)) != len(self.input_lens):
            raise WorkbenchError(f"--input-len {list(self.input_lens)}: each length is a request class; no repeats")
        if self.output_len < 2:
            raise WorkbenchError(f"--output-len {self.output_len}: TPOT needs at least 2 output tokens")
        if self.num_prompts < len(self.input_lens):
            raise WorkbenchError(
                f"--num-prompts {self.num_prompts}: at least one request per class ({len(self.input_lens)} classes)"
            )
        if self.concurrency < 1 or self.warmup_requests < 0:
            raise WorkbenchError("--concurrency must be >= 1 and --warmup >= 0")

    def classes(self) -> tuple[str, ...]:
        return tuple(class_name(n) for n in self.input_lens)

    def lengths(self) -> tuple[int, ...]:
        """The prompt length of each request, classes interleaved: 64, 256, 64, 256, ..."""
        return tuple(self.input_lens[i % len(self.input_lens)] for i in range(self.num_prompts))


def class_name(input_len: int) -> str:
    return f"in{input_len}"


@dataclass(frozen=True)
class ProfileWindow:
    """The profiler's bounded window inside a profiled load: skip `delay_steps`, then record `max_steps`."""

    delay_steps: int = 4
    max_steps: int = 32

    def __post_init__(self) -> None:
        if self.delay_steps < 0:
            raise WorkbenchError(f"--profile-delay {self.delay_steps}: 0 or more engine steps")
        if self.max_steps < 2:
            raise WorkbenchError(f"--profile-steps {self.max_steps}: record at least 2 engine steps")

    def body(self, prefix: str) -> dict[str, int | str]:
        """The `/start_profile` body: this window's file prefix and its bounds."""
        return {"profile_prefix": prefix, "delay_iterations": self.delay_steps, "max_iterations": self.max_steps}


@dataclass(frozen=True)
class PerfTwinRequest:
    """One performance twin: the same load on side A and side B, profiled, repeated, attributed."""

    side_a: Side
    side_b: Side
    workload: PerfWorkload = PerfWorkload()
    window: ProfileWindow = ProfileWindow()
    repeats: int = 2  # extra windows per side, for the noise
    thresholds: str | Path | None = None  # policy/twin/perf.yaml by default
    tokenizer: Path | None = None  # the model's tokenizer, for a URL side whose model directory is not readable here
    out: Path | None = None  # default runs/perf-twin/<stamp>; an existing run resumes
    extra_env: tuple[tuple[str, str], ...] = ()
    extra_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.side_a.label, self.side_b.label) != ("A", "B"):
            raise WorkbenchError(f"sides {self.side_a.label}, {self.side_b.label}: give side A first, then side B")
        if not 1 <= self.repeats < MAX_WINDOWS:
            raise WorkbenchError(
                f"--repeats {self.repeats}: 1 or more (the noise is measured, not assumed), at most {MAX_WINDOWS - 1}"
            )

    @property
    def windows_per_side(self) -> int:
        return 1 + self.repeats


__all__ = ["MAX_WINDOWS", "PerfTwinRequest", "PerfWorkload", "ProfileWindow", "class_name"]
