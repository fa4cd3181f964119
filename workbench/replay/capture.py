"""The capture use cases: record a service's traffic through the proxy, or import a trace users already have.

    result = run_capture(CaptureRequest(upstream="http://gpu-host:8000", out=Path("runs/capture/prod")))
    result = run_import_trace(ImportTraceRequest(TraceSource.MOONCAKE, Path("conversation_trace.jsonl"), out, tokenizer=dir))

Either way the directory holds `trace.jsonl` (`workbench.serving.load.trace`) and `capture.json`
(`CAPTURE_KIND`): where the trace came from, how many requests of each class, sessions, and — for a proxy
capture — how many greedy answers the upstream answered differently when asked again (its own noise).
"""

from __future__ import annotations

import contextlib
import enum
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.replay.imports.blocks import BlockPrompts
from workbench.replay.imports.lengths import Columns, LengthFormat, LengthImport, flat_records, weka_records
from workbench.replay.imports.vllm_log import read_vllm_log
from workbench.replay.proxy import ProxyServer
from workbench.replay.recorder import CaptureSettings, CaptureStats
from workbench.results.envelope import DocumentKind, write_result
from workbench.serving.load.trace import TRACE_FILE, TraceRecord, class_counts, read_trace, write_trace
from workbench.stack.provenance import provenance

CAPTURE_KIND = DocumentKind("capture", 1)
RESULT_FILE = "capture.json"


class TraceSource(str, enum.Enum):
    PROXY = "proxy"
    MOONCAKE = "mooncake"  # Mooncake FAST'25 traces, AISBench mooncake_trace
    GUIDELLM = "guidellm"  # GuideLLM trace files (timestamp, input_length, output_length[, hash_ids])
    WEKA = "weka"  # GuideLLM's WEKA conversations
    VLLM_LOG = "vllm-log"  # a vLLM server's --enable-log-requests lines


@dataclass(frozen=True)
class CaptureResult:
    directory: Path
    source: TraceSource
    requests: int
    sessions: int
    classes: dict[str, int]
    origin: str  # the upstream URL or the imported file
    stats: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def trace(self) -> Path:
        return self.directory / TRACE_FILE

    def text(self) -> str:
        classes = ", ".join(f"{k} {v}" for k, v in sorted(self.classes.items()))
        line = f"{self.trace}: {self.requests} requests in {self.sessions} conversations ({classes}) from {self.origin}"
        if self.stats.get("shadowed"):
            line += (
                f"; {self.stats['shadow_mismatches']} of {self.stats['shadowed']} greedy answers came out "
                "differently when asked again (the upstream's own noise)"
            )
        return line

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source.value,
            "origin": self.origin,
            "trace": str(self.trace),
            "requests": self.requests,
            "sessions": self.sessions,
            "classes": self.classes,
            "stats": self.stats,
            "seconds": self.seconds,
        }

    def write(self) -> Path:
        return write_result(self.directory / RESULT_FILE, self.to_dict(), provenance(url=self.origin), CAPTURE_KIND)


def _fresh(out: Path) -> Path:
    out = Path(out)
    if (out / TRACE_FILE).exists():
        raise WorkbenchError(f"{out} already holds a {TRACE_FILE}; choose a new --out (a trace is never appended to)")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _result(out: Path, source: TraceSource, origin: str, stats: dict[str, Any], began: float) -> CaptureResult:
    records = read_trace(out) if (out / TRACE_FILE).exists() else ()
    sessions = len({r.session for r in records if r.session}) + sum(r.session is None for r in records)
    result = CaptureResult(
        out, source, len(records), sessions, class_counts(records), origin, stats, round(time.monotonic() - began, 2)
    )
    result.write()
    return result


# -- the proxy ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CaptureRequest:
    upstream: str
    out: Path
    host: str = "127.0.0.1"
    port: int = 8100
    settings: CaptureSettings = CaptureSettings()
    duration_s: float | None = None  # stop after this long (None: until Ctrl-C)
    max_requests: int | None = None  # stop once this many requests were recorded

    def __post_init__(self) -> None:
        if not self.upstream.startswith(("http://", "https://")):
            raise WorkbenchError(f"--upstream {self.upstream!r}: give the service's URL, e.g. http://127.0.0.1:8000")
        if not 0 <= self.port <= 65535:
            raise WorkbenchError(f"--listen port {self.port}: choose 0-65535 (0: any free port)")
        if not 0 <= self.settings.top_logprobs <= 20:
            raise WorkbenchError(f"--top-logprobs {self.settings.top_logprobs}: 0 (none) to 20 (vLLM's --max-logprobs)")


@contextlib.contextmanager
def capture_proxy(request: CaptureRequest) -> Iterator[ProxyServer]:
    """The proxy running in the background for the block (notebooks, tests); `capture.json` written at the end."""
    began = time.monotonic()
    out = _fresh(request.out)
    proxy = ProxyServer(request.upstream.rstrip("/"), out, request.host, request.port, request.settings)
    with proxy:
        yield proxy
    _result(out, TraceSource.PROXY, request.upstream, _stats(proxy.recorder.stats), began)


def _stats(stats: CaptureStats) -> dict[str, Any]:
    return {
        "requests": stats.requests,
        "errors": stats.errors,
        "shadowed": stats.shadowed,
        "shadow_mismatches": stats.shadow_mismatches,
        "scored": stats.scored,
    }


def run_capture(request: CaptureRequest, *, announce=print) -> CaptureResult:
    """Run the proxy until Ctrl-C (or `duration_s`, or `max_requests`); every request is saved as it finishes."""
    began = time.monotonic()
    with capture_proxy(request) as proxy:
        announce(f"capturing: send requests to {proxy.url} (forwarded to {request.upstream}); Ctrl-C stops")
        with contextlib.suppress(KeyboardInterrupt):
            while request.duration_s is None or time.monotonic() - began < request.duration_s:
                if request.max_requests is not None and proxy.recorder.stats.requests >= request.max_requests:
                    break
                time.sleep(0.2)
        if proxy.recorder.tasks:
            announce(
                f"completing {len(proxy.recorder.tasks)} recorded requests (logprobs, scores; up to "
                f"{request.settings.drain_s:g} s)"
            )
    return CaptureResult(**{**read_capture(request.out), "directory": Path(request.out)})


def read_capture(directory: Path) -> dict[str, Any]:
    data = CAPTURE_KIND.read(Path(directory) / RESULT_FILE)
    return {
        "source": TraceSource(data["source"]),
        "requests": data["requests"],
        "sessions": data["sessions"],
        "classes": data["classes"],
        "origin": data["origin"],
        "stats": data["stats"],
        "seconds": data["seconds"],
    }


# -- imports ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportTraceRequest:
    source: TraceSource
    path: Path
    out: Path
    tokenizer: Path | None = None  # the model's tokenizer directory: prompts of recorded lengths need it
    length_scale: float = 1.0
    block_size: int | None = None
    seconds_per_unit: float | None = None
    columns: Columns = Columns()
    limit: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.source is TraceSource.PROXY:
            raise WorkbenchError("--import takes a file format (mooncake, guidellm, weka, vllm-log), not 'proxy'")
        if not Path(self.path).is_file():
            raise WorkbenchError(f"--import {self.path}: no such file; check the path")
        if self.limit is not None and self.limit < 1:
            raise WorkbenchError(f"--limit {self.limit}: import at least one request")


def _length_records(request: ImportTraceRequest) -> list[TraceRecord]:
    from workbench.serving.load.workload import load_tokenizer

    spec = LengthImport(
        LengthFormat(request.source.value),
        request.length_scale,
        request.seconds_per_unit,
        request.block_size,
        request.columns,
        request.limit,
        request.seed,
    )
    tokenizer = load_tokenizer(request.tokenizer) if request.tokenizer is not None else None
    builders: dict[int, BlockPrompts] = {}

    def builder_for(block: int) -> BlockPrompts:
        if tokenizer is None:
            raise WorkbenchError("prompts of recorded lengths need the model's tokenizer: pass --tokenizer DIR")
        size = max(1, round(block * request.length_scale))
        return builders.setdefault(size, BlockPrompts(tokenizer, size, request.seed))

    if spec.format is LengthFormat.WEKA:
        return weka_records(Path(request.path), spec, builder_for)
    return flat_records(
        Path(request.path), spec, builder_for(request.block_size or spec.format.block_size) if tokenizer else None
    )


def run_import_trace(request: ImportTraceRequest) -> CaptureResult:
    """Turn `request.path` into `out/trace.jsonl` (see `workbench.replay.imports`)."""
    began = time.monotonic()
    out = _fresh(request.out)
    if request.source is TraceSource.VLLM_LOG:
        records = read_vllm_log(Path(request.path), request.limit)
    else:
        records = _length_records(request)
    if not records:
        raise WorkbenchError(f"{request.path}: no requests found in it as a {request.source.value} trace")
    write_trace(out / TRACE_FILE, records)
    return _result(out, request.source, str(request.path), {"requests": len(records)}, began)


__all__ = [
    "CAPTURE_KIND",
    "CaptureRequest",
    "CaptureResult",
    "ImportTraceRequest",
    "TraceSource",
    "capture_proxy",
    "read_capture",
    "run_capture",
    "run_import_trace",
]
