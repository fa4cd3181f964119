"""Analysing large traces: seconds and peak memory of `read_profile` on a trace file.

    .venv/bin/python benchmarks/bench_trace_analysis.py                  # synthetic 1M events + a real capture
    .venv/bin/python benchmarks/bench_trace_analysis.py --trace DIR_OR_FILE [--events 1000000]

Two traces:

1. synthetic: a torch.profiler Chrome trace (object layout, uncompressed) shaped like a vLLM CPU worker's
   — engine-step annotations, a forward scope per step, nested aten ops, vLLM C++ ops and a
   `_C::shm_allreduce` per layer — with `--events` complete events (default one million);
2. the largest worker trace a tiny-model capture produces (`--trace` to give one; otherwise
   `profile --recipe cpu-tiny` is captured at TP=2 with its default workload, under the caller's lock).

Each analysis runs in a fresh child process: the wall time of `read_profile(path)` and the memory
it needs — VmHWM (peak RSS) minus VmRSS just before reading, i.e. what the analysis itself added on
top of the interpreter and its imports. Targets: under 30 s, and that growth under twice the file's
size (for a gzipped trace the uncompressed size is shown too).
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TARGET_S = 30.0
TARGET_RSS_FACTOR = 2.0
LAYERS = 24
TAG = "BENCH_RESULT "


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def child(path: Path) -> dict:
    from workbench.profiling.read import read_profile

    before = _status_kib("VmRSS")
    began = time.perf_counter()
    profile = read_profile(path)
    seconds = time.perf_counter() - began
    peak = _status_kib("VmHWM")
    return {
        "seconds": seconds,
        "rss_before_mib": before / 1024,
        "peak_mib": peak / 1024,
        "growth_mib": (peak - before) / 1024,
        "steps": len(profile.steps),
        "ops": len(profile.ops),
    }


def synthetic_events(count: int):
    """Events of a vLLM-CPU-like worker trace until `count` complete events have been produced."""
    made, t, step = 0, 0.0, 0
    while made < count:
        yield {
            "ph": "X",
            "cat": "user_annotation",
            "name": f"execute_context_0(0)_generation_{4 + step % 5}({4 + step % 5})",
            "pid": 100,
            "tid": 100,
            "ts": t,
            "dur": 3000.0,
        }
        yield {
            "ph": "X",
            "cat": "user_annotation",
            "name": "gpu_model_runner: forward",
            "pid": 100,
            "tid": 100,
            "ts": t + 100,
            "dur": 2500.0,
        }
        made += 2
        cursor = t + 110
        for layer in range(LAYERS):
            for name, dur, children in (
                ("aten::linear", 40.0, ("aten::t", "aten::addmm")),
                ("_C::rms_norm", 8.0, ()),
                ("aten::silu", 6.0, ()),
                ("_C::shm_allreduce", 12.0, ()),
            ):
                yield {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": name,
                    "pid": 100,
                    "tid": 100,
                    "ts": cursor,
                    "dur": dur,
                    "args": {"External id": made, "Sequence number": layer},
                }
                made += 1
                for index, child_name in enumerate(children):
                    yield {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": child_name,
                        "pid": 100,
                        "tid": 100,
                        "ts": cursor + 2 + index * 15,
                        "dur": 12.0,
                        "args": {"External id": made},
                    }
                    made += 1
                cursor += dur + 2
        t += 3500.0
        step += 1


def write_synthetic(path: Path, events: int) -> int:
    with path.open("w") as handle:
        handle.write(
            '{"schemaVersion": 1, "distributedInfo": {"backend": "gloo", "rank": 0, "world_size": 1}, '
            '"traceEvents": [\n'
        )
        first = True
        for event in synthetic_events(events):
            handle.write(("" if first else ",\n") + json.dumps(event, separators=(",", ":")))
            first = False
        handle.write('\n], "traceName": "synthetic"}\n')
    return path.stat().st_size


def run_child(path: Path) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", str(path)], capture_output=True, text=True, check=False)
    line = next((x for x in done.stdout.splitlines() if x.startswith(TAG)), None)
    if line is None:
        raise SystemExit(f"child failed on {path}:\n{done.stderr[-2000:]}")
    return json.loads(line[len(TAG) :])


def uncompressed_size(path: Path) -> int:
    with path.open("rb") as handle:
        gzipped = handle.read(2) == b"\x1f\x8b"
    if not gzipped:
        return path.stat().st_size
    size = 0
    with gzip.open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            size += len(chunk)
    return size


def report(label: str, path: Path, result: dict) -> None:
    disk, raw = path.stat().st_size, uncompressed_size(path)
    growth = result["growth_mib"] * 2**20
    print(f"{label}: {path.name}")
    print(f"  file {disk / 2**20:.1f} MiB on disk" + (f" ({raw / 2**20:.1f} MiB uncompressed)" if raw != disk else ""))
    print(
        f"  read_profile: {result['seconds']:.2f} s (target < {TARGET_S:.0f} s: "
        f"{'met' if result['seconds'] < TARGET_S else 'MISSED'}); {result['steps']} steps, {result['ops']} op rows"
    )
    print(
        f"  memory: {result['rss_before_mib']:.0f} MiB before reading, peak {result['peak_mib']:.0f} MiB, growth "
        f"{result['growth_mib']:.0f} MiB = {growth / disk:.2f}x the file on disk"
        + (f", {growth / raw:.2f}x uncompressed" if raw != disk else "")
        + f" (target < {TARGET_RSS_FACTOR:.0f}x: {'met' if growth < TARGET_RSS_FACTOR * disk else 'MISSED'})"
    )


def capture_largest(tmp: Path) -> Path:
    from workbench.profiling.capture import capture
    from workbench.recipes import load_serving_recipe

    recipe = load_serving_recipe("cpu-tiny").with_overrides(engine={"tensor_parallel_size": 2})
    result = capture(recipe, tmp / "capture", progress=False)
    return max(result.trace_dir.glob("*.pt.trace.json*"), key=lambda p: p.stat().st_size)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--events", type=int, default=1_000_000, help="complete events in the synthetic trace")
    parser.add_argument("--trace", type=Path, help="a real trace file (or directory: its largest trace)")
    args = parser.parse_args()
    if args.child:
        print(TAG + json.dumps(child(args.child)), flush=True)
        return 0
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        synthetic = tmp / "dp0_pp0_tp0_dcp0_ep0_rank0.1.pt.trace.json"
        began = time.perf_counter()
        write_synthetic(synthetic, args.events)
        print(f"wrote a synthetic trace of {args.events:,} events in {time.perf_counter() - began:.1f} s")
        report("synthetic vLLM-CPU-like trace", synthetic, run_child(synthetic))
        real = args.trace
        if real is not None and real.is_dir():
            real = max(real.rglob("*.pt.trace.json*"), key=lambda p: p.stat().st_size)
        real = real or capture_largest(tmp)
        report("largest tiny-model capture trace", real, run_child(real))
    return 0


if __name__ == "__main__":
    sys.exit(main())
