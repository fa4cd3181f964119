"""`ascend-workbench bench`: streaming load at fixed lengths; vLLM-compatible throughput and latency.

    ascend-workbench bench --url http://127.0.0.1:8000 --input-len 128 --output-len 64 \
        --num-prompts 128 --concurrency 16 --json runs/bench.json

Attaches to --url or launches --recipe (and stops it afterwards). Per-request records stream to
OUT.requests.jsonl while the run goes, so an interrupted run keeps what it measured. Prompts shorter
than `SHORT_PROMPT_TOKENS` get a warning: such a run measures decoding of toy requests, not the service
(docs/METHOD.md §10).
"""

from __future__ import annotations

import argparse
import math
import sys

from workbench.errors import WorkbenchError
from workbench.recipes import load_serving_recipe
from workbench.serving.api import SLO, HangWatch, LoadResult, ServerHung, Workload, run_load
from workbench.verbs._common import add_hang_after, add_json_out, add_server_source, server_from_args

GOODPUT_KEYS = ("ttft", "tpot", "e2el")

# Below this many prompt tokens a load run says nothing about production (docs/METHOD.md §10: fixed
# lengths, close to production's): prefill, the half of the work that sets TTFT, becomes a negligible
# share of each request, and the KV cache holds so little that memory never limits the batch, so the
# throughput measures the decoding of toy requests. Chat and RAG prompts run to hundreds or thousands of
# tokens; `vllm bench serve`'s random data set defaults to 1024 input tokens.
SHORT_PROMPT_TOKENS = 256


def short_prompt_warning(input_len: int) -> str | None:
    """The warning for prompts too short to measure the service by, else None."""
    if input_len >= SHORT_PROMPT_TOKENS:
        return None
    return (
        f"--input-len {input_len} is below {SHORT_PROMPT_TOKENS} tokens: throughput measured with prompts this short "
        "says nothing about production (prefill and KV-cache pressure are left out); use the prompt length your "
        "service sees, or at least 1024 as `vllm bench serve` does (docs/METHOD.md §10)"
    )


def parse_goodput(pairs: list[str] | None) -> SLO:
    """['ttft:500', 'tpot:50'] -> SLO(ttft_ms=500, tpot_ms=50), as `vllm bench serve --goodput`."""
    values = {}
    for pair in pairs or []:
        key, sep, value = pair.partition(":")
        if not sep or key not in GOODPUT_KEYS:
            raise WorkbenchError(
                f"--goodput {pair!r}: write KEY:MILLISECONDS with KEY one of {', '.join(GOODPUT_KEYS)}"
            )
        try:
            values[f"{key}_ms"] = float(value)
        except ValueError:
            raise WorkbenchError(f"--goodput {pair!r}: {value!r} is not a number of milliseconds") from None
    return SLO(**values)


HELP = "streaming load test: throughput, TTFT, TPOT, ITL, E2E (vllm bench serve definitions)"
DESCRIPTION = (
    "Send streamed completions with exact input token lengths and fixed output lengths, at a "
    "fixed concurrency or a Poisson/gamma request rate, and report vLLM-compatible metrics."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_server_source(parser)
    parser.add_argument("--input-len", type=int, required=True, help="prompt tokens per request (exact)")
    parser.add_argument("--output-len", type=int, required=True, help="output tokens per request (ignore_eos)")
    count = parser.add_mutually_exclusive_group(required=True)
    count.add_argument("--num-prompts", type=int, help="number of requests to send")
    count.add_argument("--duration", type=float, help="send requests for this many seconds")
    parser.add_argument(
        "--concurrency", type=int, help="requests in flight (closed loop), or the cap with --request-rate"
    )
    parser.add_argument("--request-rate", type=float, default=math.inf, help="arrivals per second (open loop)")
    parser.add_argument("--burstiness", type=float, default=1.0, help="gamma shape: 1 = Poisson, <1 burstier")
    parser.add_argument("--prefix-ratio", type=float, default=0.0, help="share of each prompt common to all prompts")
    parser.add_argument("--goodput", nargs="+", metavar="KEY:MS", help="SLOs for goodput, e.g. ttft:500 tpot:50")
    parser.add_argument("--tokenizer", help="model directory with the tokenizer (default: the server's own)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated prompts (default 0)")
    add_hang_after(parser)
    add_json_out(parser, "the full result (requests, summary, provenance; requests also stream to OUT.requests.jsonl)")
    parser.set_defaults(handler=run)


def format_summary(result: LoadResult) -> str:
    s = result.summary
    lines = [
        f"{'=' * 18} Load result ({result.workload.mode}) {'=' * 18}",
        f"{'Requests sent / completed / failed:':42s} {s.sent} / {s.completed} / {s.failed}",
        f"{'Duration (s):':42s} {s.duration_s:.2f}",
        f"{'Total input / generated tokens:':42s} {s.total_input_tokens} / {s.total_output_tokens}",
        f"{'Request throughput (req/s):':42s} {s.request_throughput:.2f}",
        f"{'Output token throughput (tok/s):':42s} {s.output_throughput:.2f}",
        f"{'Total token throughput (tok/s):':42s} {s.total_token_throughput:.2f}",
    ]
    if s.request_goodput is not None:
        lines.append(f"{'Request goodput (req/s):':42s} {s.request_goodput:.2f}")
    lines.append(result.summary_frame().round(2).to_string())
    errors = sorted({r.error for r in result.records if r.error})
    lines += [f"error: {e}" for e in errors[:5]]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    workload = Workload(
        input_len=args.input_len,
        output_len=args.output_len,
        num_prompts=args.num_prompts,
        duration_s=args.duration,
        concurrency=args.concurrency,
        request_rate=args.request_rate,
        burstiness=args.burstiness,
        prefix_ratio=args.prefix_ratio,
        seed=args.seed,
        slo=parse_goodput(args.goodput),
    )
    warning = short_prompt_warning(args.input_len)
    if warning is not None:
        print(f"ascend-workbench bench: warning: {warning}", file=sys.stderr)
    recipe = load_serving_recipe(args.recipe) if args.recipe else None
    records_path = args.json.with_suffix(".requests.jsonl") if args.json else None
    if records_path:
        records_path.parent.mkdir(parents=True, exist_ok=True)
        records_path.unlink(missing_ok=True)
    with server_from_args(args) as server:
        try:
            result = run_load(
                server.url,
                server.model,
                workload,
                tokenizer_dir=args.tokenizer,
                recipe=recipe,
                records_path=records_path,
                progress=not args.no_progress,
                hang=HangWatch.of(server, args.hang_after) if args.hang_after > 0 else None,
            )
        except ServerHung:
            server.retire()  # a hung server launched here is stopped, never handed to a pool again
            raise
    print(format_summary(result))
    if args.json:
        print(f"written: {result.write(args.json)}")
    return 0 if result.summary.failed == 0 else 1
