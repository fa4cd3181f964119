"""Benchmark: vLLM output throughput with ascend_backend's plugin / without it, same workload.

Each measurement is a fresh engine in its own process (`VLLM_PLUGINS=""` switches the plugin off), on
the same batch: N prompts of a fixed length, greedy, exactly M output tokens each (ignore_eos). The
engine runs in-process (no EngineCore/worker children) so the child can time its own CPU: output
tokens per CPU-second is the headline, because it stays meaningful on a shared, oversubscribed machine;
wall-clock tokens/s is printed beside it. One warm-up generate precedes the timed ones. Runs come in
pairs, off/on then on/off, so slow drift of the machine and any first-run advantage hit both sides
alike; the ratio is taken per pair, and the median pair ratio is reported against the target (>= 0.95).

`--kernels` picks what the plugin's registry runs on CPU:
- `vllm` (the plugin's default in a vLLM CPU engine): vLLM's C++ kernels for the cache write,
  attention and RoPE (the registry's `vllm_cpu` backend), our native code for the other ops;
- `native` (ASCEND_BACKEND_FORCE_NATIVE=*): our native PyTorch kernels for every op.
Each plugin run prints which backend served how many calls of each op, so the reader sees what ran.

    .venv/bin/python benchmarks/bench_plugin.py [--model smollm2|tiny|/path] [--pairs 2]
        [--prompts 32] [--prompt-tokens 64] [--output-tokens 64] [--compiled] [--kernels vllm|native]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.95


@dataclass(frozen=True)
class Measurement:
    plugin: bool
    output_tokens: int
    cpu_s: float
    wall_s: float
    op_calls: dict  # {op: {backend: calls}} in the timed runs (empty without the plugin)

    @property
    def tokens_per_cpu_s(self) -> float:
        return self.output_tokens / self.cpu_s

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.wall_s


def child(args: argparse.Namespace) -> None:
    """Inside the measured process: build the engine, warm up, time `--repeats` generates."""
    from vllm import LLM, SamplingParams

    llm = LLM(
        model=args.model,
        enforce_eager=not args.compiled,
        max_model_len=1024,
        block_size=32,
        max_num_seqs=args.prompts,
        seed=0,
        distributed_executor_backend="uni",
    )
    vocab = llm.get_tokenizer().vocab_size
    prompts = [
        {"prompt_token_ids": [(1000 + 7919 * i + 31 * t) % (vocab - 1000) + 500 for t in range(args.prompt_tokens)]}
        for i in range(args.prompts)
    ]
    params = SamplingParams(temperature=0.0, max_tokens=args.output_tokens, ignore_eos=True)
    # Warm-up on the whole batch: one-time costs (the fused decode kernel's compile, allocator growth)
    # must not land in the timed runs of either side.
    llm.generate(prompts, params, use_tqdm=False)
    registry = None
    if "ascend_backend" in sys.modules:  # the plugin loaded: count what serves the timed runs
        from ascend_backend.registry import REGISTRY as registry

        registry.reset_stats()
    tokens, cpu, wall = 0, 0.0, 0.0
    for _ in range(args.repeats):
        cpu0, wall0 = time.process_time(), time.perf_counter()
        outputs = llm.generate(prompts, params, use_tqdm=False)
        cpu += time.process_time() - cpu0
        wall += time.perf_counter() - wall0
        tokens += sum(len(o.outputs[0].token_ids) for o in outputs)
    op_calls = registry.stats() if registry is not None else {}
    Path(args.out).write_text(json.dumps({"output_tokens": tokens, "cpu_s": cpu, "wall_s": wall, "op_calls": op_calls}))


def measure(args: argparse.Namespace, plugin: bool, workdir: Path) -> Measurement:
    out = workdir / f"run-{time.monotonic_ns()}.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASCEND_BACKEND_")}
    env.update(
        VLLM_CPU_KVCACHE_SPACE=env.get("VLLM_CPU_KVCACHE_SPACE", "2"),
        VLLM_CPU_OMP_THREADS_BIND=env.get("VLLM_CPU_OMP_THREADS_BIND", "0-1"),
        VLLM_ENABLE_V1_MULTIPROCESSING="0",
        VLLM_DISABLE_COMPILE_CACHE="1",
        PYTHONPATH=str(REPO_ROOT),
    )
    if plugin:
        env.pop("VLLM_PLUGINS", None)
        if args.kernels == "native":
            env["ASCEND_BACKEND_FORCE_NATIVE"] = "*"
    else:
        env["VLLM_PLUGINS"] = ""
    argv = [
        sys.executable,
        __file__,
        "--child",
        "--out",
        str(out),
        "--model",
        args.model,
        "--prompts",
        str(args.prompts),
        "--prompt-tokens",
        str(args.prompt_tokens),
        "--output-tokens",
        str(args.output_tokens),
        "--repeats",
        str(args.repeats),
    ]
    if args.compiled:
        argv.append("--compiled")
    log = workdir / f"{out.stem}.log"
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(argv, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = proc.wait(timeout=args.timeout)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # nothing of the engine survives the measurement
            except ProcessLookupError:
                pass
    if code != 0:
        raise SystemExit(f"engine run failed (exit {code}); see {log}:\n{log.read_text(errors='replace')[-2000:]}")
    data = json.loads(out.read_text())
    return Measurement(plugin, data["output_tokens"], data["cpu_s"], data["wall_s"], data.get("op_calls", {}))


def resolve_model(name: str) -> str:
    if Path(name).is_dir():
        return name
    from workbench.embedded_models import api as embedded_models  # the benchmark may use the workbench to fetch a model

    return str(embedded_models.prepare(name))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2, help="timed generates per engine")
    parser.add_argument("--compiled", action="store_true", help="torch.compile (graph mode) instead of eager")
    parser.add_argument(
        "--kernels",
        choices=("vllm", "native"),
        default="vllm",
        help="what the plugin runs on CPU: vLLM's C++ kernels where it has them (the default) "
        "or our native PyTorch kernels for every op",
    )
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    args.model = resolve_model(args.model)
    workdir = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench_plugin_{os.getpid()}"
    workdir.mkdir(parents=True, exist_ok=True)
    mode = "compiled" if args.compiled else "eager"
    print(
        f"model {args.model} ({mode}, plugin kernels: {args.kernels}); {args.prompts} prompts x "
        f"{args.prompt_tokens} tokens -> {args.output_tokens} output tokens; {args.repeats} timed generates "
        f"per engine"
    )
    cpu_ratios, wall_ratios = [], []
    for pair in range(args.pairs):
        # Alternate which side goes first, so whatever favours the first (or second) run of a pair
        # favours both sides equally often.
        if pair % 2 == 0:
            off = measure(args, plugin=False, workdir=workdir)
            on = measure(args, plugin=True, workdir=workdir)
        else:
            on = measure(args, plugin=True, workdir=workdir)
            off = measure(args, plugin=False, workdir=workdir)
        cpu_ratios.append(on.tokens_per_cpu_s / off.tokens_per_cpu_s)
        wall_ratios.append(on.tokens_per_s / off.tokens_per_s)
        print(
            f"pair {pair + 1}: without {off.tokens_per_cpu_s:8.1f} tok/CPU-s {off.tokens_per_s:8.1f} tok/s | "
            f"with {on.tokens_per_cpu_s:8.1f} tok/CPU-s {on.tokens_per_s:8.1f} tok/s | "
            f"ratio cpu {cpu_ratios[-1]:.3f} wall {wall_ratios[-1]:.3f}",
            flush=True,
        )
        if pair == 0:
            # Imported here, in the parent only: a child that imported ascend_backend itself could no
            # longer tell from sys.modules whether the plugin loaded.
            from ascend_backend.vllm_plugin.stats import format_counts

            print(f"  plugin run served by: {format_counts(on.op_calls)}", flush=True)
    ratio = statistics.median(cpu_ratios)
    verdict = "meets" if ratio >= TARGET else "MISSES"
    print(
        f"throughput ratio with/without plugin ({mode}, kernels {args.kernels}): {ratio:.3f} "
        f"(tokens per CPU-second, median of {args.pairs}); "
        f"wall-clock {statistics.median(wall_ratios):.3f}; {verdict} the >= {TARGET} target"
    )


if __name__ == "__main__":
    main()
