"""What a performance twin is asked to run: the load, the profiler window, the repeats (typed, checked once).

    PerfTwinRequest(side_a, side_b, workload=PerfWorkload(input_lens=(64, 256), output_len=32),
                    window=ProfileWindow(delay_steps=4, max_steps=32), repeats=2)

The load is the same on both sides: `num_prompts` requests per window, exact prompt lengths (one request
class per entry of `input_lens`, interleaved), exact output lengths (ignore_eos), `concurrency` in flight —
or, made with `PerfWorkload.of_trace`, a replay trace's first requests (`trace_load.TraceLoad`: their bodies,
their recorded output lengths, the trace's request classes).
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
from typing import Any

from workbench.errors import WorkbenchError
from workbench.twin.perf.trace_load import TraceLoad
from workbench.twin.sides import Side

MAX_WINDOWS = 64  # per side: an A/A study is a benchmark's job, not one run's


@dataclass(frozen=True)
class PerfWorkload:
    """The load every window sends (both sides alike): one request class per prompt length, or a trace's requests
    in its own classes (`trace`; make it with `of_trace`, which sets `num_prompts`; the lengths then are the
    trace's and `input_lens` / `output_len` are not used)."""

    input_lens: tuple[int, ...] = (64, 256)
    output_len: int = 32
    num_prompts: int = 16
    concurrency: int = 8
    warmup_requests: int = 8
    seed: int = 0
    trace: TraceLoad | None = None

    def __post_init__(self) -> None:
        if self.concurrency < 1 or self.warmup_requests < 0:
            raise WorkbenchError("--concurrency must be >= 1 and --warmup >= 0")
        if self.trace is not None:
            if self.num_prompts != len(self.trace.records):
                raise WorkbenchError(
                    f"--num-prompts {self.num_prompts}: a trace load sends its {len(self.trace.records)} requests; "
                    "make it with PerfWorkload.of_trace(path, num_prompts=N) to take the first N"
                )
            return
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

    @classmethod
    def of_trace(
        cls,
        path: str | Path,
        num_prompts: int | None = None,
        concurrency: int = 8,
        warmup_requests: int = 8,
        seed: int = 0,
    ) -> PerfWorkload:
        """The first `num_prompts` requests of the trace at `path` (all of them by default) as the load."""
        if num_prompts is not None and num_prompts < 1:
            raise WorkbenchError(f"--num-prompts {num_prompts}: send at least one request of the trace")
        trace = TraceLoad.read(path, num_prompts)
        return cls(
            num_prompts=len(trace.records),
            concurrency=concurrency,
            warmup_requests=warmup_requests,
            seed=seed,
            trace=trace,
        )

    def request_classes(self) -> tuple[str, ...]:
        """Each request's class, in the order a window sends them."""
        if self.trace is not None:
            return self.trace.request_classes()
        return tuple(class_name(n) for n in self.lengths())

    def classes(self) -> tuple[str, ...]:
        """The request classes, each once, in the order they first come."""
        if self.trace is None:
            return tuple(class_name(n) for n in self.input_lens)
        return tuple(dict.fromkeys(self.request_classes()))

    def lengths(self) -> tuple[int, ...]:
        """The prompt length of each request: 64, 256, 64, 256, ... (classes interleaved), or the trace's."""
        if self.trace is not None:
            return self.trace.input_lens()
        return tuple(self.input_lens[i % len(self.input_lens)] for i in range(self.num_prompts))

    def output_lens(self) -> tuple[int, ...]:
        """The tokens each request decodes (ignore_eos)."""
        if self.trace is not None:
            return self.trace.output_lens()
        return (self.output_len,) * self.num_prompts

    def to_dict(self) -> dict[str, Any]:
        """The load as plans and results store it (a synthetic load's layout is the one it always had)."""
        shared = {
            "num_prompts": self.num_prompts,
            "concurrency": self.concurrency,
            "warmup_requests": self.warmup_requests,
            "seed": self.seed,
        }
        if self.trace is not None:
            return {"trace": self.trace.to_dict()} | shared
        return {"input_lens": list(self.input_lens), "output_len": self.output_len} | shared

    def describe(self) -> str:
        """One line for the result's text."""
        if self.trace is None:
            lens = "/".join(map(str, self.input_lens))
            return f"{self.num_prompts} requests, prompts {lens} tokens, {self.output_len} out"
        counts = ", ".join(f"{k} {v}" for k, v in self.trace.to_dict()["classes"].items())
        ins, outs = self.lengths(), self.output_lens()
        return (
            f"{self.num_prompts} requests of trace {self.trace.path} ({counts}), mean {sum(ins) / len(ins):.0f} "
            f"tokens in, {sum(outs) / len(outs):.0f} out"
        )


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
