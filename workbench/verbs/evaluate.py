"""`ascend-workbench evaluate (--url URL | --recipe R) --dataset NAME|FILE ...`: accuracy on data sets.

    ascend-workbench evaluate --recipe cpu-smollm2 --dataset humaneval text --limit 40 --out runs/eval/float
    ascend-workbench evaluate --recipe cpu-smollm2-w8a8 --dataset humaneval text --limit 40 \
        --out runs/eval/w8a8 --reference runs/eval/float

Per problem: NLL of the reference continuation (prompt logprobs), a greedy completion, and for code its
pass@1 in a sandboxed process (`workbench.evaluate`). Results are appended to OUT/<data set>.jsonl as
they come (rerun the same command to resume); OUT/summary.json holds the summary. With --reference, the
run is compared with an earlier one (float vs W8A8): NLL delta, greedy agreement, pass@1 both sides,
a verdict per data set against policy/evaluate/thresholds.yaml. Exit 1 when the comparison fails or a
request failed, 2 for a user error (server down, malformed data set).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import httpx

from workbench.errors import WorkbenchError
from workbench.results.files import write_text
from workbench.verbs._common import add_json_out, add_server_source, server_from_args

HELP = "accuracy on data sets (HumanEval, text, a JSONL file): NLL, greedy agreement, pass@1, verdicts"
DESCRIPTION = (
    "Measure a server on data sets: per-token NLL of reference continuations, greedy completions, "
    "pass@1 of code in a sandbox; compare with an earlier run (--reference) against thresholds. Attaches to "
    "--url (any OpenAI-compatible vLLM server, e.g. vllm-ascend) or launches --recipe and stops it afterwards."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_server_source(parser)
    parser.add_argument(
        "--dataset",
        nargs="+",
        required=True,
        metavar="NAME|FILE",
        help="humaneval, text, or a JSONL file (schema: workbench/evaluate/datasets.py)",
    )
    parser.add_argument("--limit", type=int, help="only the first N problems of each data set (default: all)")
    parser.add_argument("--out", type=Path, help="result directory (default runs/evaluate/<recipe or model>)")
    parser.add_argument("--reference", type=Path, metavar="DIR", help="an earlier evaluate --out to compare with")
    parser.add_argument(
        "--thresholds", help="thresholds file or shipped name (default: policy/evaluate/thresholds.yaml)"
    )
    parser.add_argument("--measures", default="nll,greedy,pass1", help="comma-separated subset of nll,greedy,pass1")
    parser.add_argument("--max-tokens", type=int, help="greedy completion cap (default 384 for code, 128 for text)")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=10.0, help="wall-clock seconds per pass@1 program")
    parser.add_argument("--tokenizer", type=Path, help="tokenizer directory, for a server without /tokenize")
    add_json_out(parser, "the summary (and the comparison)")
    parser.set_defaults(handler=run)


def parse_measures(text: str):
    from workbench.evaluate.api import Measure

    try:
        measures = frozenset(Measure(part.strip()) for part in text.split(",") if part.strip())
    except ValueError:
        raise WorkbenchError(f"--measures {text!r}: choose from {', '.join(m.value for m in Measure)}") from None
    if not measures:
        raise WorkbenchError("--measures is empty: choose from nll, greedy, pass1")
    return measures


def require_listening(url: str) -> None:
    """Fail at once, with the fix, when nothing listens at `url` (attach() would wait for a starting server)."""
    try:
        httpx.get(f"{url.rstrip('/')}/health", timeout=5.0)
    except httpx.ConnectError as exc:
        raise WorkbenchError(
            f"--url {url}: nothing answers there ({exc}); start the server (e.g. ascend-workbench serve --recipe "
            "cpu-smollm2) and pass its URL, or pass --recipe to launch one"
        ) from None
    except httpx.HTTPError:
        pass  # a slow or half-started server: attach() waits for it and explains a timeout


def settings_from_args(args: argparse.Namespace):
    from workbench.evaluate.api import Limits, Settings

    if args.concurrency < 1 or (args.max_tokens is not None and args.max_tokens < 1) or args.timeout <= 0:
        raise WorkbenchError("--concurrency, --max-tokens and --timeout must be positive")
    tokens = {} if args.max_tokens is None else {"max_tokens_code": args.max_tokens, "max_tokens_text": args.max_tokens}
    limits = Limits(wall_s=args.timeout, cpu_s=max(1, math.ceil(args.timeout / 2)))
    return Settings(measures=parse_measures(args.measures), concurrency=args.concurrency, limits=limits, **tokens)


def run(args: argparse.Namespace) -> int:
    from workbench.evaluate.api import EvaluateRequest, run_evaluate
    from workbench.recipes import load_serving_recipe

    request = EvaluateRequest(
        tuple(args.dataset),
        out=args.out,
        limit=args.limit,
        reference=args.reference,
        thresholds=args.thresholds,
        settings=settings_from_args(args),
        tokenizer=args.tokenizer,
    )
    if args.url:
        require_listening(args.url)
    recipe = load_serving_recipe(args.recipe) if args.recipe else None
    with server_from_args(args) as server:
        result = run_evaluate(request, server, recipe, progress=not args.no_progress)
    print(result.text())
    if args.json:
        write_text(args.json, result.summary_path.read_text(encoding="utf-8"))
    return 1 if result.failed else 0
