"""Streaming load generator: fixed prompt/output lengths, per-request timings, `vllm bench serve` metrics.

docs/METHOD.md §10: measure before tuning — output tokens/s under concurrency, time to first token and
end-to-end latency, always at fixed, realistic prompt and output lengths. This module sends streamed
`/v1/completions` requests (asyncio + aiohttp) whose prompts have an exact token count (built with the
model's own tokenizer) and whose outputs have a fixed length (`max_tokens` + `ignore_eos`), in one of
two arrival modes:

- fixed concurrency: C requests in flight at all times (`concurrency=C`);
- open loop: arrivals at `request_rate` per second, exponential gaps (Poisson) when burstiness is 1,
  gamma(shape=burstiness) otherwise (< 1 burstier, > 1 more regular); `concurrency` caps in-flight.

and stops after `num_prompts` requests or after `duration_s` seconds of sending.

Metric definitions are those of vLLM's `vllm bench serve` (vllm/benchmarks/serve.py), so numbers can be
compared with published ones:
    TTFT   request sent -> first streamed chunk that carries a choice
    ITL    gaps between consecutive chunks with a choice (all requests' gaps pooled)
    TPOT   (E2E - TTFT) / (output_tokens - 1), per request with more than one output token
    E2E    request sent -> last chunk with a choice
    throughput = tokens (or requests) of successful requests / wall time of the whole run
    goodput    = successful requests meeting every SLO (ttft/tpot/e2el, ms) / wall time
Output token counts come from the server's usage block (`stream_options.include_usage`).

Why aiohttp for the stream and not httpx (used everywhere else in the workbench): on the same SSE
stream httpx spent about 3x the client CPU per token (its pure-Python h11 parser handles every chunk),
and on a small machine the client competes with the server for the same cores. aiohttp's parser is in
C and is what `vllm bench serve` uses; token chunks are also recognised here without a JSON parse.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from workbench.embedded_models.transformers_lock import TRANSFORMERS_IMPORT, auto_tokenizer
from workbench.errors import WorkbenchError
from workbench.serving.client import model_dir, server_version
from workbench.stack.provenance import provenance

PERCENTILES = (50.0, 90.0, 99.0)
_WORD_TOKEN = re.compile(r"^ [a-z]{2,}$")  # " apple": survives decode -> encode as exactly one token


# -- what to send ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SLO:
    """Service-level objectives for goodput, in milliseconds (None = not part of the objective)."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2el_ms: float | None = None

    @property
    def active(self) -> bool:
        return any(v is not None for v in (self.ttft_ms, self.tpot_ms, self.e2el_ms))


def workload_problems(
    input_lens: Sequence[int],
    output_lens: Sequence[int],
    concurrencies: Sequence[int] = (),
    request_rates: Sequence[float] = (),
    prefix_ratios: Sequence[float] = (0.0,),
    burstiness: float = 1.0,
) -> list[str]:
    """The bounds every workload obeys, for one load run or a sweep's lists of values alike."""
    problems = []
    if any(v < 1 for v in (*input_lens, *output_lens)):
        problems.append(f"input_len and output_len must be >= 1, got {list(input_lens)}, {list(output_lens)}")
    if any(c < 1 for c in concurrencies):
        problems.append(f"concurrency must be >= 1, got {list(concurrencies)}")
    if any(r <= 0 for r in request_rates) or burstiness <= 0:
        problems.append("request_rate and burstiness must be > 0")
    if any(not 0.0 <= r < 1.0 for r in prefix_ratios):
        problems.append(f"prefix_ratio must be in [0, 1), got {list(prefix_ratios)}")
    return problems


@dataclass(frozen=True)
class Workload:
    """One load run's shape. Exactly one of num_prompts / duration_s; concurrency and/or request_rate."""

    input_len: int
    output_len: int
    num_prompts: int | None = None
    duration_s: float | None = None
    concurrency: int | None = None
    request_rate: float = math.inf
    burstiness: float = 1.0
    prefix_ratio: float = 0.0
    seed: int = 0
    slo: SLO = field(default_factory=SLO)
    temperature: float = 0.0
    request_timeout_s: float = 600.0

    def __post_init__(self) -> None:
        problems = workload_problems(
            (self.input_len,),
            (self.output_len,),
            () if self.concurrency is None else (self.concurrency,),
            (self.request_rate,),
            (self.prefix_ratio,),
            self.burstiness,
        )
        if (self.num_prompts is None) == (self.duration_s is None):
            problems.append("give exactly one of num_prompts (--num-prompts) or duration_s (--duration)")
        if self.num_prompts is not None and self.num_prompts < 1:
            problems.append(f"num_prompts must be >= 1, got {self.num_prompts}")
        if self.duration_s is not None and self.duration_s <= 0:
            problems.append(f"duration_s must be > 0, got {self.duration_s}")
        if self.concurrency is None and math.isinf(self.request_rate):
            problems.append("give concurrency (--concurrency) or a finite request_rate (--request-rate)")
        if problems:
            raise WorkbenchError("load workload: " + "; ".join(problems))

    @property
    def mode(self) -> str:
        return f"concurrency={self.concurrency}" if math.isinf(self.request_rate) else f"rate={self.request_rate}/s"


@dataclass(frozen=True)
class Prompt:
    text: str
    num_tokens: int  # as the server will count it, special tokens included


def _word_token_ids(tokenizer: Any, wanted: int, rng: np.random.Generator) -> np.ndarray:
    """Token ids that decode to ' word' and re-encode to themselves, so prompts round-trip exactly."""
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    found: list[int] = []
    for token_id in rng.permutation(len(tokenizer)):
        token_id = int(token_id)
        if token_id in special:
            continue
        piece = tokenizer.decode([token_id])
        if _WORD_TOKEN.match(piece) and tokenizer.encode(piece, add_special_tokens=False) == [token_id]:
            found.append(token_id)
            if len(found) >= wanted:
                break
    if len(found) < 16:
        raise WorkbenchError(
            f"tokenizer {getattr(tokenizer, 'name_or_path', '?')}: found only {len(found)} plain-word tokens; "
            "exact-length prompts need a byte-level BPE or SentencePiece vocabulary with ' word' tokens"
        )
    return np.array(found)


def build_prompts(
    tokenizer: Any, count: int, input_len: int, *, prefix_ratio: float = 0.0, seed: int = 0
) -> list[Prompt]:
    """`count` prompts of exactly `input_len` tokens as the server counts them (special tokens included).

    The first round(prefix_ratio * content) tokens are shared by every prompt, to exercise prefix
    caching. Each prompt is a sequence of ' word' tokens; its length is checked by re-encoding.
    """
    specials = tokenizer.num_special_tokens_to_add() if hasattr(tokenizer, "num_special_tokens_to_add") else 0
    content = input_len - specials
    if content < 1:
        raise WorkbenchError(
            f"input_len {input_len} leaves no room after {specials} special token(s); use a larger --input-len"
        )
    rng = np.random.default_rng(seed)
    words = _word_token_ids(tokenizer, 4096, rng)
    prefix = rng.choice(words, size=int(round(prefix_ratio * content)))
    prompts = []
    for _ in range(count):
        ids = np.concatenate([prefix, rng.choice(words, size=content - len(prefix))])
        text = tokenizer.decode(ids.tolist())
        counted = len(tokenizer.encode(text, add_special_tokens=True))
        if counted != input_len:
            raise WorkbenchError(
                f"built a prompt of {counted} tokens instead of {input_len}: this tokenizer merges across "
                "word boundaries; pass a different --seed or report the tokenizer"
            )
        prompts.append(Prompt(text, counted))
    return prompts


def arrival_offsets(count: int, request_rate: float, burstiness: float, rng: np.random.Generator) -> np.ndarray:
    """Send times (s from start) for `count` requests: gamma gaps with mean 1/rate, as vllm bench serve.

    Like vLLM, the cumulative times are rescaled so the last arrival is exactly at count / rate, which
    keeps the offered load identical across seeds. rate = inf sends everything at t = 0.
    """
    if math.isinf(request_rate):
        return np.zeros(count)
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (request_rate * burstiness), size=count)
    offsets = np.cumsum(gaps)
    return offsets * ((count / request_rate) / offsets[-1])


# -- what came back --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RequestRecord:
    """One request as the client saw it (times in seconds)."""

    index: int
    sent_s: float  # since the start of the run
    prompt_tokens: int
    output_tokens: int
    ttft_s: float
    e2el_s: float
    itl_s: tuple[float, ...]
    success: bool
    error: str = ""

    @property
    def tpot_s(self) -> float:
        """(E2E - TTFT) / (output_tokens - 1); 0.0 with one output token or less (vLLM's convention)."""
        return (self.e2el_s - self.ttft_s) / (self.output_tokens - 1) if self.output_tokens > 1 else 0.0


def _stats_ms(values: list[float]) -> dict[str, float]:
    data = np.array(values or [0.0]) * 1000.0  # vLLM reports 0 for an empty list
    row = {"mean": float(np.mean(data)), "median": float(np.median(data)), "std": float(np.std(data))}
    row.update({f"p{p:g}": float(np.percentile(data, p)) for p in PERCENTILES})
    return row


@dataclass(frozen=True)
class LoadSummary:
    """Aggregates over one run, with vLLM's definitions (latency statistics in milliseconds)."""

    sent: int
    completed: int
    failed: int
    duration_s: float
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float
    output_throughput: float
    total_token_throughput: float
    request_goodput: float | None
    ttft_ms: dict[str, float]
    tpot_ms: dict[str, float]
    itl_ms: dict[str, float]
    e2el_ms: dict[str, float]

    def flat(self) -> dict[str, float | int | None]:
        """One flat row: 'mean_ttft_ms', 'p99_itl_ms', ... (the names vllm bench serve's JSON uses)."""
        row: dict[str, float | int | None] = {k: v for k, v in asdict(self).items() if not isinstance(v, dict)}
        for metric in ("ttft", "tpot", "itl", "e2el"):
            for stat, value in getattr(self, f"{metric}_ms").items():
                row[f"{stat}_{metric}_ms"] = value
        return row


def summarize(records: list[RequestRecord], duration_s: float, slo: SLO = SLO()) -> LoadSummary:
    ok = [r for r in records if r.success]
    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum(r.prompt_tokens for r in ok)
    tpots = [r.tpot_s for r in ok if r.output_tokens > 1]
    goodput = None
    if slo.active:
        limits = [(slo.ttft_ms, "ttft_s"), (slo.tpot_ms, "tpot_s"), (slo.e2el_ms, "e2el_s")]
        good = sum(all(limit is None or getattr(r, attr) * 1000.0 <= limit for limit, attr in limits) for r in ok)
        goodput = good / duration_s
    return LoadSummary(
        sent=len(records),
        completed=len(ok),
        failed=len(records) - len(ok),
        duration_s=duration_s,
        total_input_tokens=in_tokens,
        total_output_tokens=out_tokens,
        request_throughput=len(ok) / duration_s,
        output_throughput=out_tokens / duration_s,
        total_token_throughput=(in_tokens + out_tokens) / duration_s,
        request_goodput=goodput,
        ttft_ms=_stats_ms([r.ttft_s for r in ok]),
        tpot_ms=_stats_ms(tpots),
        itl_ms=_stats_ms([gap for r in ok for gap in r.itl_s]),
        e2el_ms=_stats_ms([r.e2el_s for r in ok]),
    )


# -- streaming one request -------------------------------------------------------------------------


class _StreamState:
    """Timestamps and counts gathered while one SSE stream arrives (private to `_send_one`)."""

    __slots__ = ("first", "last", "gaps", "usage", "error")

    def __init__(self) -> None:
        self.first: float | None = None
        self.last = 0.0
        self.gaps: list[float] = []
        self.usage: dict | None = None
        self.error = ""

    def on_event(self, body: bytes, now: float) -> None:
        """One `data: ...` payload. Token chunks are recognised without a JSON parse: the stream is
        dominated by them and parsing each costs the client more CPU than the rest of the work."""
        if body.startswith(b'{"id"') and b'"choices":[{' in body:
            self.on_choice(now)
            return
        if body == b"[DONE]":
            return
        event = json.loads(body)
        if event.get("choices"):
            self.on_choice(now)
        if event.get("usage"):
            self.usage = event["usage"]
        if event.get("error"):
            self.error = str(event["error"])[:500]

    def on_choice(self, now: float) -> None:
        if self.first is None:
            self.first = now
        else:
            self.gaps.append(now - self.last)
        self.last = now


async def _send_one(
    session: aiohttp.ClientSession, url: str, payload: dict, index: int, prompt: Prompt, t0: float
) -> RequestRecord:
    state = _StreamState()
    started = time.perf_counter()
    try:
        async with session.post(url, json=payload) as response:
            if response.status != 200:
                state.error = f"HTTP {response.status}: {(await response.read())[:300]!r}"
            else:
                buffer = b""
                async for chunk in response.content.iter_any():
                    now = time.perf_counter()
                    buffer += chunk
                    *events, buffer = buffer.split(b"\n\n")
                    for event in events:
                        if event.startswith(b"data: "):
                            state.on_event(event[6:], now)
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError, json.JSONDecodeError) as exc:
        state.error = f"{type(exc).__name__}: {exc}"[:500]
    success = state.first is not None and not state.error
    if state.first is None and not state.error:
        state.error = "stream ended without any token"
    usage = state.usage or {}
    return RequestRecord(
        index=index,
        sent_s=started - t0,
        prompt_tokens=int(usage.get("prompt_tokens") or prompt.num_tokens),
        output_tokens=int(usage.get("completion_tokens") or (len(state.gaps) + 1 if success else 0)),
        ttft_s=(state.first - started) if state.first is not None else 0.0,
        e2el_s=(state.last - started) if state.first is not None else 0.0,
        itl_s=tuple(state.gaps),
        success=success,
        error=state.error,
    )


# -- the run ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadResult:
    """Everything one run produced: the workload, every request, the aggregates, and provenance."""

    workload: Workload
    records: tuple[RequestRecord, ...]
    summary: LoadSummary
    meta: dict[str, Any]

    def to_frame(self) -> pd.DataFrame:
        """One row per request (ms), ordered by send time."""
        rows = [
            {
                "index": r.index,
                "sent_s": r.sent_s,
                "success": r.success,
                "prompt_tokens": r.prompt_tokens,
                "output_tokens": r.output_tokens,
                "ttft_ms": r.ttft_s * 1000.0,
                "tpot_ms": r.tpot_s * 1000.0,
                "mean_itl_ms": float(np.mean(r.itl_s)) * 1000.0 if r.itl_s else 0.0,
                "e2el_ms": r.e2el_s * 1000.0,
                "error": r.error,
            }
            for r in self.records
        ]
        return pd.DataFrame(rows).sort_values("sent_s", ignore_index=True)

    def summary_frame(self) -> pd.DataFrame:
        """Latency statistics as a table: rows ttft/tpot/itl/e2el, columns mean, median, std, p50..."""
        s = self.summary
        return pd.DataFrame({m: getattr(s, f"{m}_ms") for m in ("ttft", "tpot", "itl", "e2el")}).T.add_suffix("_ms")

    def to_dict(self) -> dict[str, Any]:
        return {
            "meta": self.meta,
            "workload": asdict(self.workload),
            "summary": self.summary.flat(),
            "requests": [asdict(r) for r in self.records],
        }

    def save(self, path: Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1, default=str))
        return path


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
        self.next_index = 0
        self.sink = sink.open("a") if sink else None
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

    async def send(self, client: aiohttp.ClientSession, url: str, index: int) -> None:
        prompt = self.prompts[index % len(self.prompts)]
        record = await _send_one(client, url, self.payload_for(prompt), index, prompt, self.t0)
        self.records.append(record)
        if self.sink:
            self.sink.write(json.dumps(asdict(record)) + "\n")
            self.sink.flush()
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()
        if self.sink:
            self.sink.close()


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


async def run_load_async(
    url: str,
    model: str,
    prompts: list[Prompt],
    workload: Workload,
    *,
    meta: dict[str, Any] | None = None,
    records_path: Path | None = None,
    progress: bool = True,
) -> LoadResult:
    """Run `workload` against the server at `url` (prompts from `build_prompts`)."""
    endpoint = f"{url.rstrip('/')}/v1/completions"

    def payload_for(prompt: Prompt) -> dict:
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
    try:
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:
            run.start_clock()  # after the session exists: setting it up is not part of the run
            if math.isinf(workload.request_rate):
                await _closed_loop(run, client, endpoint)
            else:
                await _open_loop(run, client, endpoint)
            duration = time.perf_counter() - run.t0
    finally:
        run.close()
    records = tuple(sorted(run.records, key=lambda r: r.index))
    return LoadResult(workload, records, summarize(list(records), duration, workload.slo), dict(meta or {}))


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


def _import_quietly() -> None:
    with contextlib.suppress(Exception):  # load_tokenizer imports again and raises what went wrong
        auto_tokenizer()


def import_tokenizer_library_in_background() -> None:
    """Start importing transformers' AutoTokenizer in a daemon thread and return at once.

    The first import in a process takes ~10 s of CPU here (transformers pulls in torch, and
    scikit-learn when it is installed). A sweep needs the tokenizer only once its server is up, so
    it starts this before the server and the import overlaps the start instead of following it;
    `load_tokenizer` then waits for it under the same lock. A no-op once transformers is imported.
    """
    if "transformers.models.auto.tokenization_auto" not in sys.modules:
        threading.Thread(target=_import_quietly, name="workbench-import-transformers", daemon=True).start()


def load_tokenizer(model_dir: str | Path) -> Any:
    """The model's own tokenizer (transformers.AutoTokenizer on the local model directory)."""
    path = Path(model_dir)
    if not (path / "tokenizer_config.json").exists() and not (path / "tokenizer.json").exists():
        raise WorkbenchError(
            f"no tokenizer files in {path}: exact-length prompts need the model's tokenizer; pass --tokenizer DIR "
            "(a local Hugging Face model directory)"
        )
    with TRANSFORMERS_IMPORT:  # from_pretrained imports the tokenizer's class lazily too
        return auto_tokenizer().from_pretrained(str(path))


def run_load(
    url: str,
    model: str,
    workload: Workload,
    *,
    tokenizer_dir: str | Path | None = None,
    recipe: Any = None,
    records_path: Path | None = None,
    progress: bool = True,
) -> LoadResult:
    """Build exact-length prompts with the model's tokenizer and run `workload` against `url`.

    The tokenizer comes from `tokenizer_dir`, else from the server's own model directory when it is
    local. Records are appended to `records_path` (JSON lines) as they complete.
    """
    served_dir = model_dir(url, model)  # None when the server's model is not on this machine
    directory = tokenizer_dir or served_dir
    if directory is None:
        raise WorkbenchError(
            f"{url} serves {model!r} from a path this machine cannot read; pass tokenizer_dir / --tokenizer"
        )
    tokenizer = load_tokenizer(directory)
    pool = workload.num_prompts or 256  # duration runs cycle through a pool
    prompts = build_prompts(tokenizer, pool, workload.input_len, prefix_ratio=workload.prefix_ratio, seed=workload.seed)
    meta = provenance(recipe=recipe, url=url, model=model, server_version=server_version(url), model_dir=served_dir)
    return run_coroutine(
        run_load_async(url, model, prompts, workload, meta=meta, records_path=records_path, progress=progress)
    )
