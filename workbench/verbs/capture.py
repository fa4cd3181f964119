"""`ascend-workbench capture`: record a service's own traffic through a proxy, or import a trace you have.

    # put the proxy in front of the GPU service; point the clients at :8100; Ctrl-C stops and saves
    ascend-workbench capture --upstream http://gpu-host:8000 --listen 0.0.0.0:8100 --out runs/capture/prod
    # or import: a Mooncake / AISBench trace, a GuideLLM trace file, WEKA conversations, a vLLM request log
    ascend-workbench capture --import mooncake conversation_trace.jsonl --tokenizer MODEL_DIR --out runs/capture/mc
    ascend-workbench capture --import vllm-log server.log --out runs/capture/log

Every request the proxy forwards untouched; `/v1/chat/completions` and `/v1/completions` are recorded with
their arrival time, their conversation and the answer (greedy answers also get their per-token logprobs,
asked again off the client's path: --top-logprobs 0 turns that off). The trace format is docs/replay.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.verbs._common import terminate_as_interrupt

HELP = "record a service's traffic through an OpenAI-compatible proxy, or import a trace (Mooncake, GuideLLM, vLLM log)"
DESCRIPTION = (
    "Forward every request to --upstream untouched and record chat and completions requests (arrival time, "
    "conversation, answer, logprobs) in OUT/trace.jsonl; or import a trace users already have into the same format. "
    "`replay`, `bench --trace`, `sweep` and `twin --prompts` read the result."
)


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise WorkbenchError(f"--listen {text!r}: write HOST:PORT, e.g. 127.0.0.1:8100 (port 0: any free port)")
    return host or "127.0.0.1", int(port)


def _column(text: str) -> tuple[str, str]:
    field, sep, name = text.partition("=")
    if not sep or field not in ("timestamp", "input_length", "output_length", "hash_ids"):
        raise WorkbenchError(
            f"--column {text!r}: write FIELD=NAME, FIELD one of timestamp, input_length, output_length, hash_ids"
        )
    return field, name


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--upstream", metavar="URL", help="the service to record, e.g. http://127.0.0.1:8000")
    source.add_argument(
        "--import",
        dest="import_format",
        metavar="FORMAT",
        choices=["mooncake", "guidellm", "weka", "vllm-log"],
        help="import a trace file instead: mooncake (also AISBench), guidellm, weka, vllm-log",
    )
    parser.add_argument("path", nargs="?", type=Path, help="with --import: the file to import")
    parser.add_argument("--out", type=Path, required=True, help="directory for trace.jsonl and capture.json (new)")
    proxy = parser.add_argument_group("proxy")
    proxy.add_argument(
        "--listen", default="127.0.0.1:8100", help="HOST:PORT the proxy listens on (default 127.0.0.1:8100)"
    )
    proxy.add_argument(
        "--top-logprobs",
        type=int,
        default=5,
        help="runners-up recorded per token of greedy answers, asked again off the client's path (0: none)",
    )
    proxy.add_argument(
        "--no-score", action="store_true", help="do not score sampled answers (their replay is then guard-only)"
    )
    proxy.add_argument("--duration", type=float, metavar="S", help="stop after S seconds (default: Ctrl-C)")
    proxy.add_argument("--max-requests", type=int, metavar="N", help="stop after N recorded requests")
    imports = parser.add_argument_group("import")
    imports.add_argument("--tokenizer", type=Path, help="the model's tokenizer directory (prompts of recorded lengths)")
    imports.add_argument("--length-scale", type=float, default=1.0, help="shrink every length and block alike (0-1]")
    imports.add_argument(
        "--block-size", type=int, help="tokens per hash id (default: Mooncake 512, the WEKA file's own)"
    )
    imports.add_argument(
        "--time-unit", type=float, metavar="S", help="seconds per timestamp unit (default: Mooncake 0.001, else 1)"
    )
    imports.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="FIELD=NAME",
        help="a GuideLLM trace's column name, e.g. timestamp=ts (repeatable)",
    )
    imports.add_argument("--limit", type=int, help="import the first N requests")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from workbench.replay.api import (
        CaptureRequest,
        CaptureSettings,
        Columns,
        ImportTraceRequest,
        TraceSource,
        run_capture,
        run_import_trace,
    )

    if args.import_format is not None:
        if args.path is None:
            raise WorkbenchError("--import FORMAT takes the file to import: capture --import mooncake FILE --out DIR")
        columns = Columns(**dict(_column(c) for c in args.column))
        request = ImportTraceRequest(
            TraceSource(args.import_format),
            args.path,
            args.out,
            args.tokenizer,
            args.length_scale,
            args.block_size,
            args.time_unit,
            columns,
            args.limit,
        )
        print(run_import_trace(request).text())
        return 0
    if args.path is not None:
        raise WorkbenchError(f"{args.path}: a file goes with --import FORMAT; the proxy records what it forwards")
    host, port = _listen(args.listen)
    settings = CaptureSettings(top_logprobs=args.top_logprobs, score_sampled=not args.no_score)
    request = CaptureRequest(args.upstream, args.out, host, port, settings, args.duration, args.max_requests)
    with terminate_as_interrupt():  # `kill` stops the proxy like Ctrl-C: every finished request is saved
        print(run_capture(request).text())
    return 0
