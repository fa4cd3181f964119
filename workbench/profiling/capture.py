"""Capture a profile for real: a recipe's server with vLLM's profiler, a fixed workload, one window.

    with launch_profiled(recipe) as (server, shared):   # leased from the engine pool when one is open
        warm-up requests                      (allocation, compilation: outside the window)
        POST /start_profile {"profile_prefix": ...}
        the fixed workload                    (workbench.serving.load, exact lengths)
        POST /stop_profile
        wait until every rank's trace is completely written, then move the window's files out
    read the traces -> Profile (+ provenance, the workload's throughput)

A profiler-configured server writes into one folder per configuration (`shared_trace_dir`, in the engine
pool's folder or under runs/profiler-traces/): the folder is part of its command line, so every capture, notebook and
performance twin asking for the same configuration leases the same pooled server, and each window's
files, named by its own prefix, are moved from there into the caller's folder as soon as they are written.

vLLM 0.32's profiler is configured with `--profiler-config` (vllm/config/profiler.py `ProfilerConfig`):
`torch_profiler_dir` must be absolute; `torch_profiler_with_stack` is off (with Python stacks a CPU
worker wrote ~90 MB gzipped per rank for four short requests); the API server's own CPU trace is off
(`ignore_frontend`: its time is not in an engine step, and it costs the front end while it runs).
`VLLM_CUSTOM_SCOPES_FOR_PROFILING=1` makes vLLM mark its host phases (schedule, preprocess, forward,
sample, ...) so the host-bound verdict can name one.

On an Ascend recipe vllm-ascend swaps in torch_npu's profiler behind the same flag and endpoints
(vllm-ascend @182b75ea, docs/source/developer_guide/performance_and_debug/service_profiling_guide.md:
`--profiler-config '{"profiler": "torch", "torch_profiler_dir": ..., "torch_profiler_with_stack":
false}'`, then `torch_npu.profiler.profiler.analyse(<*_ascend_pt>)` to produce ASCEND_PROFILER_OUTPUT);
the analysis step runs here in a subprocess, so this module never imports torch_npu.

The traces are still being written when /stop_profile returns: `wait_for_traces` waits until every
expected rank has a file whose size has stopped changing and whose gzip stream is complete.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import httpx
from tqdm.auto import tqdm

from workbench.errors import WorkbenchError
from workbench.profiling.detect import worker_traces
from workbench.profiling.profile import Profile
from workbench.profiling.torch_npu import read_torch_npu
from workbench.profiling.torch_trace import read_torch_traces
from workbench.recipes import DeviceKind, ServingRecipe, stable_hash
from workbench.serving.client import model_dir, server_version
from workbench.serving.load.metrics import LoadResult
from workbench.serving.load.runner import run_coroutine, run_load_async
from workbench.serving.load.workload import Workload, build_prompts, load_tokenizer
from workbench.serving.server import Server, launch
from workbench.settings import engine_pool_dir, run_dir
from workbench.stack.provenance import provenance

SCOPES_ENV = {"VLLM_CUSTOM_SCOPES_FOR_PROFILING": "1"}
SETTLE_S = 2.0  # a trace whose size has not changed for this long, and whose gzip stream ends, is complete
TRACE_TIMEOUT_S = 300.0
ANALYSE_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class CaptureWorkload:
    """The fixed load profiled: `num_prompts` requests of exact lengths, `concurrency` in flight.

    The warm-up before the window runs the same shape at the same concurrency (`warmup_requests`
    requests, the window's count by default): a staggered load reaches every batch size from 1 to
    `concurrency`, and each one it reaches for the first time may make torch.compile compile — inside
    the window that would be measured as the step's time (a 2 s compile was, with a 4-request warm-up).
    """

    input_len: int = 128
    output_len: int = 32
    num_prompts: int = 16
    concurrency: int = 8
    warmup_requests: int = 16
    seed: int = 0

    def load(self) -> Workload:
        return Workload(
            input_len=self.input_len,
            output_len=self.output_len,
            num_prompts=self.num_prompts,
            concurrency=self.concurrency,
            seed=self.seed,
        )

    def warmup(self) -> Workload:
        return Workload(
            input_len=self.input_len,
            output_len=self.output_len,
            num_prompts=self.warmup_requests,
            concurrency=min(self.concurrency, self.warmup_requests),
            seed=self.seed + 1,
        )


def profiler_config(trace_dir: Path) -> dict[str, Any]:
    """The `--profiler-config` JSON (vLLM 0.32 ProfilerConfig fields; see the module docstring)."""
    return {
        "profiler": "torch",
        "torch_profiler_dir": str(Path(trace_dir).resolve()),
        "torch_profiler_with_stack": False,
        "ignore_frontend": True,
    }


def profiler_args(trace_dir: Path) -> tuple[str, ...]:
    return ("--profiler-config", json.dumps(profiler_config(trace_dir)))


def shared_trace_dir(recipe: ServingRecipe, extra_env: Mapping[str, str] | None = None) -> Path:
    """The profiler folder of one configuration (recipe identity and extra environment), created: inside the
    engine pool's folder while one is open (the main job, a test session: every notebook and test then shares the
    configuration's server), else under runs/profiler-traces/."""
    key = stable_hash({"recipe": recipe.identity(), "env": dict(sorted((extra_env or {}).items()))})
    pool = engine_pool_dir()
    base = pool / "profiler-traces" if pool is not None else run_dir("profiler-traces")
    directory = (base / key).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@contextlib.contextmanager
def launch_profiled(
    recipe: ServingRecipe,
    *,
    extra_env: Mapping[str, str] | None = None,
    extra_args: tuple[str, ...] = (),
    log_dir: Path | None = None,
    progress: bool = True,
) -> Iterator[tuple[Server, Path]]:
    """`recipe`'s server with the profiler configured and vLLM's host scopes on: (server, its trace folder)."""
    env = {**SCOPES_ENV, **(extra_env or {})}
    shared = shared_trace_dir(recipe, extra_env)
    args = (*extra_args, *profiler_args(shared))
    with launch(recipe, extra_env=env, extra_args=args, log_dir=log_dir, progress=progress) as server:
        yield server, shared


def profile_prefix(*parts: str) -> str:
    """A window's trace-file prefix as vLLM accepts it (vllm/config/profiler.py `validate_profile_prefix`: ASCII
    letters, digits, '.', '_', '-', a letter or digit first, at most 128): other characters become '-'."""
    text = "-".join(parts)
    return "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "-" for c in text)[:128]


def move_outputs(outputs: list[Path], where: Path) -> list[Path]:
    """Move a window's trace files (or *_ascend_pt folders) into `where`; their new paths."""
    where.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.move(str(path), where / path.name)) for path in outputs]


def expected_ranks(recipe: ServingRecipe) -> int:
    e = recipe.engine
    return e.tensor_parallel_size * e.pipeline_parallel_size * e.data_parallel_size


def post(url: str, path: str, body: dict[str, Any] | None = None, timeout_s: float = 600.0) -> None:
    """POST an endpoint of the profiler API; a 404 means the server was started without --profiler-config."""
    try:
        response = httpx.post(f"{url}{path}", json=body, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise WorkbenchError(f"{url}{path}: {type(exc).__name__}: {exc}; is the server still running?") from None
    if response.status_code == 404:
        raise WorkbenchError(
            f"{url}{path}: 404; the server was started without --profiler-config (vLLM only "
            "registers /start_profile and /stop_profile when the profiler is configured)"
        )
    if response.status_code != 200:
        raise WorkbenchError(f"{url}{path}: HTTP {response.status_code} {response.text[:200]}")


def gzip_complete(path: Path) -> bool:
    """True when `path` is not gzip, or is a gzip stream that decompresses to its end."""
    with path.open("rb") as handle:
        if handle.read(2) != b"\x1f\x8b":
            return True
        handle.seek(0)
        decoder = zlib.decompressobj(wbits=31)
        while chunk := handle.read(1 << 20):
            try:
                decoder.decompress(chunk, 0)
            except zlib.error:
                return False
            if decoder.eof:
                return True
    return decoder.eof


def _settled(paths: list[Path], sizes: dict[Path, tuple[int, float]], now: float) -> bool:
    """Update the size history; True when every path kept its size for SETTLE_S and is complete."""
    steady = True
    for path in paths:
        size = path.stat().st_size
        last = sizes.get(path)
        if last is None or last[0] != size:
            sizes[path] = (size, now)
            steady = False
        elif now - last[1] < SETTLE_S:
            steady = False
    return steady and all(gzip_complete(p) for p in paths)


def window_outputs(trace_dir: Path, prefix: str, device: DeviceKind, since: float = 0.0) -> list[Path]:
    """The outputs of the window started with `prefix`: worker traces (CPU, CUDA) or *_ascend_pt dirs (NPU).

    vLLM names them `<prefix>_<worker>` (the worker is `dp0_pp0_tp0_dcp0_ep0_rank0`-style). A platform
    whose worker ignores the prefix (an out-of-tree NPU worker may) is matched by time instead: the
    outputs created since the window started (`since`, a time.time() value).
    """
    found = _npu_dirs(trace_dir) if device is DeviceKind.NPU else worker_traces(trace_dir)
    named = [p for p in found if p.name.startswith(f"{prefix}_")]
    return named or [p for p in found if since and p.stat().st_mtime >= since]


def wait_for_traces(
    trace_dir: Path,
    ranks: int,
    prefix: str,
    *,
    timeout_s: float = TRACE_TIMEOUT_S,
    device: DeviceKind = DeviceKind.CPU,
    server: Server | None = None,
    since: float = 0.0,
) -> list[Path]:
    """The ranks' outputs of window `prefix` once completely written; WorkbenchError naming what is missing."""
    deadline = time.monotonic() + timeout_s
    sizes: dict[Path, tuple[int, float]] = {}
    while True:
        found = window_outputs(trace_dir, prefix, device, since)
        files = [f for d in found for f in d.rglob("*") if f.is_file()] if device is DeviceKind.NPU else found
        if len(found) >= ranks and _settled(files, sizes, time.monotonic()):
            return found
        if server is not None and (report := server.diagnose()) is not None:
            raise WorkbenchError(f"the server died while writing its traces: {report.summary}; {report.fix}")
        if time.monotonic() > deadline:
            raise WorkbenchError(
                f"{trace_dir}: {len(found)} of {ranks} rank traces after {timeout_s:.0f} s "
                f"({', '.join(p.name for p in found) or 'none'}); the workers did not finish writing — check the "
                "server log, the disk space, and that torch_profiler_dir is writable"
            )
        time.sleep(0.5)


def _npu_dirs(trace_dir: Path) -> list[Path]:
    return sorted(p for p in trace_dir.glob("*_ascend_pt") if p.is_dir())


def analyse_ascend(trace_dir: Path, timeout_s: float = ANALYSE_TIMEOUT_S) -> None:
    """torch_npu's offline analysis of every *_ascend_pt without ASCEND_PROFILER_OUTPUT, in a subprocess."""
    for directory in _npu_dirs(trace_dir):
        if (directory / "ASCEND_PROFILER_OUTPUT").is_dir():
            continue
        code = f"from torch_npu.profiler.profiler import analyse; analyse({str(directory)!r})"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0:
            raise WorkbenchError(
                f"{directory}: torch_npu analyse() failed ({done.stderr.strip()[-300:]}); run it by "
                f'hand: python -c "{code}"'
            )


@dataclass(frozen=True)
class Capture:
    """One capture: the profile, the load that ran inside the window, and where the files are."""

    profile: Profile
    load: LoadResult
    trace_dir: Path
    log_path: Path | None


def server_tokenizer(server: Server) -> Any:
    """The served model's own tokenizer (exact-length prompts need it); a clear error when it is not local."""
    directory = model_dir(server.url, server.model)
    if directory is None:
        raise WorkbenchError(
            f"{server.url} serves {server.model!r} from a path this machine cannot read; profiling "
            "builds exact-length prompts with the model's tokenizer, so serve a local model directory"
        )
    return load_tokenizer(directory)


def _run(server: Server, tokenizer: Any, workload: Workload, progress: bool) -> LoadResult:
    prompts = build_prompts(tokenizer, workload.num_prompts, workload.input_len, seed=workload.seed)
    return run_coroutine(run_load_async(server.url, server.model, prompts, workload, progress=progress))


def profile_window(
    server: Server,
    trace_dir: Path,
    workload: CaptureWorkload,
    recipe: ServingRecipe,
    *,
    prefix: str = "window",
    tokenizer: Any = None,
    progress: bool = True,
    keep_in: Path | None = None,
) -> tuple[LoadResult, Profile]:
    """On a running, profiler-configured server: warm up, profile the workload, wait for and read the traces.

    `prefix` names this window's files (vLLM's `profile_prefix`), so one server can profile many windows;
    `keep_in`: move them there from the server's folder before reading them.
    """
    tokenizer = tokenizer or server_tokenizer(server)
    if workload.warmup_requests:
        _run(server, tokenizer, workload.warmup(), progress=False)
    started = time.time()
    post(server.url, "/start_profile", {"profile_prefix": prefix})
    try:
        result = _run(server, tokenizer, workload.load(), progress)
    finally:
        post(server.url, "/stop_profile")
    outputs = wait_for_traces(
        trace_dir, expected_ranks(recipe), prefix, device=recipe.device, server=server, since=started
    )
    if keep_in is not None:
        outputs, trace_dir = move_outputs(outputs, keep_in), keep_in
    return result, read_window(trace_dir, outputs, recipe.device)


def read_window(trace_dir: Path, outputs: list[Path], device: DeviceKind) -> Profile:
    """The Profile of one window's outputs (on NPU after torch_npu's analysis of each *_ascend_pt)."""
    if device is DeviceKind.NPU:
        analyse_ascend(trace_dir)
        return read_torch_npu(trace_dir, [p / "ASCEND_PROFILER_OUTPUT" for p in outputs])
    return read_torch_traces(outputs, trace_dir)


def capture(
    recipe: ServingRecipe,
    out_dir: Path,
    workload: CaptureWorkload = CaptureWorkload(),
    *,
    extra_env: Mapping[str, str] | None = None,
    progress: bool = True,
) -> Capture:
    """`recipe`'s profiler-configured server (leased when pooled), profile `workload`, read the traces.

    Writes `out_dir/traces/` (the window's raw traces) and `out_dir/profile.json` (the Profile, with provenance).
    """
    out_dir = Path(out_dir).resolve()
    trace_dir = out_dir / "traces"
    bar = tqdm(total=4, desc=f"profile {recipe.name}", disable=not progress, bar_format="{desc}: {n}/{total} {postfix}")
    with bar:
        bar.set_postfix_str("starting the server")
        with launch_profiled(recipe, extra_env=extra_env, log_dir=out_dir, progress=progress) as (server, shared):
            bar.update(1)
            bar.set_postfix_str("profiling the workload")
            prefix = profile_prefix("capture", out_dir.parent.name, out_dir.name)
            result, profile = profile_window(
                server, shared, workload, recipe, prefix=prefix, progress=progress, keep_in=trace_dir
            )
            bar.update(1)
            meta = provenance(
                recipe=recipe, url=server.url, model=server.model, server_version=server_version(server.url)
            )
            log_path = server.log_path
        bar.set_postfix_str("server stopped")
        bar.update(2)
    profile = with_meta(profile, meta, workload, result)
    profile.write(out_dir / "profile.json")
    return Capture(profile, result, trace_dir, log_path)


def with_meta(profile: Profile, stamp: dict[str, Any], workload: CaptureWorkload, result: LoadResult) -> Profile:
    """The profile with provenance, the workload and its load summary in `meta`."""
    meta = {**profile.meta, "provenance": stamp, "workload": asdict(workload), "load": result.summary.flat()}
    return replace(profile, meta=meta)
