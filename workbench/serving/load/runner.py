"""Streaming load generator: fixed prompt/output lengths, per-request timings, `vllm bench serve` metrics.

docs/METHOD.md §10: measure before tuning — output tokens/s under concurrency, time to first token and
end-to-end latency, always at fixed, realistic prompt and output lengths. A run sends streamed requests
(`client`) whose prompts come from a `workload`, in one of two arrival modes:

- fixed concurrency: C requests in flight at all times (`concurrency=C`);
- open loop: arrivals at `request_rate` per second (`arrivals`); `concurrency` caps in-flight,

and stops after `num_prompts` requests or after `duration_s` seconds of sending; `metrics` defines and
computes what is reported. This module runs it (`run_load`, `run_load_async`).

A hang watchdog (`workbench.serving.hang`) reads the server's /metrics while the load runs: requests in
flight with no token and no engine step for `HangWatch.hang_after_s` end the run at once with
`ServerHung` and the evidence, instead of waiting out every request's timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import numpy as np
from tqdm.auto import tqdm

from workbench.errors import WorkbenchError
from workbench.results.jsonl import JsonlLog
from workbench.serving.client import model_dir, server_version
from workbench.serving.hang import HANG_AFTER_S, HangWatchdog, ServerHung
from workbench.serving.load.arrivals import arrival_offsets
from workbench.serving.load.client import RequestRecord, send_one
from workbench.serving.load.metrics import LoadResult, summarize
from workbench.serving.load.outputs import GUARD_SAMPLE, guard_streams
from workbench.serving.load.workload import Prompt, Workload, build_prompts, load_tokenizer
from workbench.stack.provenance import provenance


@dataclass(frozen=True)
class HangWatch:
    """How a load watches its server for a hang: the threshold, and where the evidence is (the server's
    processes and log; neither is known for an attached server). `HangWatch.of(server)` fills both."""

    hang_after_s: float = HANG_AFTER_S
    pids: Callable[[], Sequence[int]] = tuple
    log_path: Path | None = None

    @classmethod
    def of(cls, server: Any, hang_after_s: float = HANG_AFTER_S) -> HangWatch:
        return cls(hang_after_s, server.processes, getattr(server, "log_path", None))


DEFAULT_WATCH = HangWatch()


class _Run:
    """One run's mutable bookkeeping: the next prompt, records so far, the progress bar, the sink."""

    def __init__(
        self,
        workload: Workload,
        prompts: list[Prompt],
        payload_for: Callable[[Prompt], dict],
        sink: Path | None,
        progress: bool,
    ):
        self.workload = workload
        self.prompts = prompts
        self.payload_for = payload_for
        self.records: list[RequestRecord] = []
        self.kept: dict[int, list[bytes]] = {}  # event payloads of the first GUARD_SAMPLE requests
        self.next_index = 0
        self.in_flight = 0  # read by the hang watchdog's thread
        # One request per line, at up to hundreds a second: written without an fsync each (the run's
        # result file is the durable record; this log shows what was sent while it runs).
        self.sink = JsonlLog(sink, fsync=False) if sink else None
        self.bar = tqdm(total=workload.num_prompts, desc=f"load {workload.mode}", unit="req", disable=not progress)
        self.start_clock()

    def start_clock(self) -> None:
        """Time zero of the run (send times, the duration limit and throughput all count from here)."""
        self.t0 = time.perf_counter()
        self.deadline = self.t0 + self.workload.duration_s if self.workload.duration_s else math.inf

    def claim(self) -> int | None:
        """The next request index, or None when the count or the duration is used up."""
        limit = self.workload.num_prompts
        if (limit is not None and self.next_index >= limit) or time.perf_counter() >= self.deadline:
            return None
        self.next_index += 1
        return self.next_index - 1

    async def send(self, client: aiohttp.ClientSession, base: str, index: int) -> None:
        prompt = self.prompts[index % len(self.prompts)]
        kept = self.kept.setdefault(index, []) if index < GUARD_SAMPLE else None
        self.in_flight += 1
        try:
            record = await send_one(client, base + prompt.path, self.payload_for(prompt), index, prompt, self.t0, kept)
        finally:
            self.in_flight -= 1
        self.records.append(record)
        if self.sink:
            self.sink.append(asdict(record))
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


async def _closed_loop(run: _Run, client: aiohttp.ClientSession, url: str) -> None:
    async def worker() -> None:
        while (index := run.claim()) is not None:
            await run.send(client, url, index)

    await asyncio.gather(*(worker() for _ in range(run.workload.concurrency or 1)))


async def _open_loop(run: _Run, client: aiohttp.ClientSession, url: str) -> None:
    w = run.workload
    rng = np.random.default_rng(w.seed)
    planned = w.num_prompts or max(1, math.ceil(w.duration_s * w.request_rate * 2) + 16)
    offsets = arrival_offsets(planned, w.request_rate, w.burstiness, rng)
    limit = asyncio.Semaphore(w.concurrency) if w.concurrency else None

    async def limited(index: int) -> None:
        if limit is None:
            return await run.send(client, url, index)
        async with limit:
            await run.send(client, url, index)

    tasks = []
    for offset in offsets:
        delay = run.t0 + float(offset) - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        index = run.claim()
        if index is None:
            break
        tasks.append(asyncio.create_task(limited(index)))
    await asyncio.gather(*tasks)


async def _trace_loop(run: _Run, client: aiohttp.ClientSession, url: str) -> None:
    """A trace's requests, each at its recorded offset divided by the speed (conversations are not held in
    order here: `bench` measures the load; `replay` keeps sessions and judges answers)."""
    speed = run.workload.trace_speed or 1.0
    order = sorted(range(len(run.prompts)), key=lambda i: run.prompts[i].offset_s or 0.0)
    tasks = []
    for position in order[: run.workload.num_prompts]:
        delay = run.t0 + (run.prompts[position].offset_s or 0.0) / speed - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if time.perf_counter() >= run.deadline:
            break
        run.next_index += 1
        tasks.append(asyncio.create_task(run.send(client, url, position)))
    await asyncio.gather(*tasks)


def trace_payload(body: dict, model: str) -> dict:
    """A trace request as a load request: its own body, streamed with usage, to the target's model."""
    payload = dict(body) | {"model": model, "stream": True}
    payload["stream_options"] = dict(body.get("stream_options") or {}) | {"include_usage": True}
    return payload


async def run_load_async(
    url: str,
    model: str,
    prompts: list[Prompt],
    workload: Workload,
    *,
    stamp: dict[str, Any] | None = None,
    records_path: Path | None = None,
    progress: bool = True,
    hang: HangWatch | None = DEFAULT_WATCH,
) -> LoadResult:
    """Run `workload` against the server at `url` (prompts from `build_prompts`).

    Raises `ServerHung` when the watchdog finds the server hung (`hang=None`: not watched); the
    requests finished before it are in `records_path`.
    """
    endpoint = url.rstrip("/")

    def payload_for(prompt: Prompt) -> dict:
        if prompt.body is not None:
            return trace_payload(prompt.body, model)
        return {
            "model": model,
            "prompt": prompt.text,
            "max_tokens": workload.output_len,
            "ignore_eos": True,
            "temperature": workload.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }

    in_flight = workload.concurrency or 0  # 0 = no connection limit (open loop without a cap)
    connector = aiohttp.TCPConnector(limit=in_flight, force_close=False)
    timeout = aiohttp.ClientTimeout(total=workload.request_timeout_s, sock_connect=30.0)
    run = _Run(workload, prompts, payload_for, records_path, progress)
    hung = asyncio.Event()
    watchdog = _watchdog(url, hang, run, hung)
    try:
        with watchdog or contextlib.nullcontext():
            async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:
                run.start_clock()  # after the session exists: setting it up is not part of the run
                send = _closed_loop if math.isinf(workload.request_rate) else _open_loop
                send = _trace_loop if workload.trace_speed is not None else send
                await _unless_hung(send(run, client, endpoint), hung)
                duration = time.perf_counter() - run.t0
    finally:
        run.close()
    if hung.is_set() and watchdog is not None and watchdog.report is not None:
        raise ServerHung(watchdog.report, completed=len(run.records))
    records = tuple(sorted(run.records, key=lambda r: r.index))
    summary = summarize(list(records), duration, workload.slo)
    return LoadResult(workload, records, summary, dict(stamp or {}), guard_streams(run.kept, prompts))


def _watchdog(url: str, hang: HangWatch | None, run: _Run, hung: asyncio.Event) -> HangWatchdog | None:
    """The run's watchdog; it sets `hung` (in this event loop) when it reports."""
    if hang is None:
        return None
    loop = asyncio.get_running_loop()
    return HangWatchdog(
        url,
        hang_after_s=hang.hang_after_s,
        in_flight=lambda: run.in_flight,
        pids=hang.pids,
        log_path=hang.log_path,
        on_hang=lambda _report: loop.call_soon_threadsafe(hung.set),
    )


async def _unless_hung(sending: Coroutine[Any, Any, None], hung: asyncio.Event) -> None:
    """Run the sending coroutine to its end, or cancel it (its requests with it) when `hung` is set."""
    load = asyncio.ensure_future(sending)
    waiter = asyncio.ensure_future(hung.wait())
    try:
        await asyncio.wait({load, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not load.done():
            load.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await load  # re-raises what the load raised, if it ended by itself


T = TypeVar("T")


def _run_in_new_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run on uvloop when it is installed (vLLM's server installs it): less event-loop CPU per streamed
    chunk (about 10% of the client's total here), which matters when client and server share cores."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


def run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """asyncio.run, also from inside Jupyter (whose loop is already running): then in a helper thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run_in_new_loop(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = _run_in_new_loop(coro)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="workbench-loadgen")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def run_load(
    url: str,
    model: str,
    workload: Workload,
    *,
    tokenizer_dir: str | Path | None = None,
    recipe: Any = None,
    records_path: Path | None = None,
    progress: bool = True,
    hang: HangWatch | None = DEFAULT_WATCH,
    prompts: list[Prompt] | None = None,
) -> LoadResult:
    """Build exact-length prompts with the model's tokenizer and run `workload` against `url` (or send the
    given `prompts`, e.g. a trace's: `workbench.serving.load.trace.trace_prompts`).

    The tokenizer comes from `tokenizer_dir`, else from the server's own model directory when it is
    local. Records are appended to `records_path` (JSON lines) as they complete. `hang`: see
    `run_load_async`.
    """
    served_dir = model_dir(url, model)  # None when the server's model is not on this machine
    if prompts is None:
        directory = tokenizer_dir or served_dir
        if directory is None:
            raise WorkbenchError(
                f"{url} serves {model!r} from a path this machine cannot read; pass tokenizer_dir / --tokenizer"
            )
        tokenizer = load_tokenizer(directory)
        pool = workload.num_prompts or 256  # duration runs cycle through a pool
        prompts = build_prompts(
            tokenizer, pool, workload.input_len, prefix_ratio=workload.prefix_ratio, seed=workload.seed
        )
    stamp = provenance(recipe=recipe, url=url, model=model, server_version=server_version(url), model_dir=served_dir)
    return run_coroutine(
        run_load_async(
            url, model, prompts, workload, stamp=stamp, records_path=records_path, progress=progress, hang=hang
        )
    )
