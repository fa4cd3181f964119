"""Compare two full-tensor dumps of a SmolLM2-135M-sized model: wall time and peak RSS.

Target: peak RSS of the compare process stays below the interpreter's baseline (measured in the same
process after imports and a 16-element warm-up compare, before the real one) plus 3x the largest
single tensor in either dump, i.e. the compare streams tensor by tensor instead of holding a dump.

The model is the prepared real SmolLM2-135M-Instruct when `--model-dir` is given or when the models
cache holds one (`<cache>/models/smollm2`); otherwise a stand-in Llama with SmolLM2-135M's tensor sizes
(hidden 576, intermediate 1536, 30 layers, 9/3 heads, vocab 49152) and random weights. The reference
dump is float32, the test dump bfloat16 of the same weights, on a 128-token prompt (deterministic ids).

Timing ratio: the compare's wall time against an I/O floor measured in the same run (reading every
tensor file of both dumps once, no arithmetic).

    .venv/bin/python benchmarks/bench_compare_dumps.py [--layers 30 --tokens 128 --model-dir DIR --workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def _rss_kib(field: str) -> int:
    """VmRSS (current) or VmHWM (peak) of this process, KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _default_model_dir() -> Path | None:
    from workbench.settings import embedded_model_dir

    candidate = embedded_model_dir("smollm2")
    return candidate if (candidate / "config.json").is_file() else None


def _stand_in(args: argparse.Namespace):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        max_position_embeddings=max(2048, args.tokens),
        tie_word_embeddings=True,
        rms_norm_eps=1e-5,
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval()


def capture_pair(args: argparse.Namespace, workdir: Path) -> tuple[Path, Path, str]:
    """Write the float32 reference dump and the bfloat16 test dump; returns their paths and the model used."""
    import torch

    from workbench.accuracy.dump import capture_dump, load_causal_lm

    ref, test = workdir / "ref-fp32", workdir / "test-bf16"
    if (ref / "manifest.json").is_file() and (test / "manifest.json").is_file():
        print(f"reusing the dumps in {workdir} (delete them to capture again)")
        return test, ref, json.loads((ref / "manifest.json").read_text())["model"]
    model_dir = Path(args.model_dir) if args.model_dir else _default_model_dir()
    if model_dir is not None:
        model = load_causal_lm(model_dir, torch.float32, "cpu")
        label = str(model_dir)
    else:
        model = _stand_in(args)
        label = f"stand-in Llama ({args.layers} layers, hidden {args.hidden}, vocab {args.vocab})"
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (1, args.tokens), generator=torch.Generator().manual_seed(1))  # [1, S]
    for path, dtype in ((ref, torch.float32), (test, torch.bfloat16)):
        start = time.perf_counter()
        summary = capture_dump(
            model.to(dtype),
            {"input_ids": ids, "use_cache": False},
            path,
            prompt_token_ids=ids[0].tolist(),
            model_description=label,
        )
        print(f"captured {summary.record_count} tensors ({dtype}) in {time.perf_counter() - start:.1f} s -> {path}")
    return test, ref, label


def child_measure(test: str, reference: str) -> None:
    """Runs in a fresh process: baseline after imports, then the compare (peak RSS), then the I/O floor."""
    import torch

    from workbench.accuracy.dump import open_dump
    from workbench.accuracy.dump_compare import compare_dumps
    from workbench.accuracy.metrics import compare_tensors

    # torch initialises its CPU kernels lazily (~11 MiB once per process): warm them up on 16 elements so
    # the baseline is the ready interpreter, and the difference is what the compare itself holds.
    compare_tensors(torch.randn(16), torch.randn(16))
    baseline_kib = _rss_kib("VmHWM")
    dumps = [open_dump(test), open_dump(reference)]
    itemsize = {"torch.float32": 4, "torch.bfloat16": 2, "torch.float16": 2, "torch.int64": 8, "torch.float64": 8}
    largest = max(itemsize.get(r.dtype, 4) * max(1, _numel(r.shape)) for d in dumps for r in d.records)

    start, cpu_start = time.perf_counter(), time.process_time()
    result = compare_dumps(dumps[0], dumps[1])
    compare_s, compare_cpu_s = time.perf_counter() - start, time.process_time() - cpu_start
    peak_kib = _rss_kib("VmHWM")

    start = time.perf_counter()  # after the peak is taken: the floor holds one file's bytes at a time
    for dump in dumps:
        for record in dump.records:
            (dump.path / record.file).read_bytes()
    load_only_s = time.perf_counter() - start
    print(
        json.dumps(
            {
                "baseline_kib": baseline_kib,
                "peak_kib": peak_kib,
                "largest_tensor_bytes": largest,
                "load_only_s": load_only_s,
                "compare_s": compare_s,
                "compare_cpu_s": compare_cpu_s,
                "compared": result.summary.compared,
                "errors": result.summary.errors,
                "warnings": result.summary.warnings,
                "first_divergence": result.summary.first_divergence,
                "worst_cosine": result.summary.worst_cosine,
            }
        )
    )


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", help="a prepared HF model directory (default: cached smollm2, else stand-in)")
    parser.add_argument("--layers", type=int, default=30)
    parser.add_argument("--hidden", type=int, default=576)
    parser.add_argument("--intermediate", type=int, default=1536)
    parser.add_argument("--heads", type=int, default=9)
    parser.add_argument("--kv-heads", type=int, default=3)
    parser.add_argument("--vocab", type=int, default=49152)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--workdir", help="where to write the two dumps, reused when present (default: a temp dir)")
    parser.add_argument("--child", nargs=2, metavar=("TEST", "REFERENCE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_measure(*args.child)
        return

    with tempfile.TemporaryDirectory(prefix="bench-compare-dumps-") as scratch:
        workdir = Path(args.workdir) if args.workdir else Path(scratch)
        test, ref, label = capture_pair(args, workdir)
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(test), str(ref)], capture_output=True, text=True, check=True
        )
        m = json.loads(out.stdout.strip().splitlines()[-1])
    mib = 1024 * 1024
    largest = m["largest_tensor_bytes"]
    extra = (m["peak_kib"] - m["baseline_kib"]) * 1024
    budget = 3 * largest
    print(f"model: {label}; {args.tokens}-token prompt; test bf16 vs reference fp32")
    print(
        f"compared {m['compared']} tensors: {m['errors']} error, {m['warnings']} warning; "
        f"first divergence {m['first_divergence']}; worst cosine {m['worst_cosine']:.6f}"
    )
    print(
        f"wall time: compare {m['compare_s']:.2f} s ({m['compare_cpu_s']:.2f} s CPU), I/O floor (read both dumps) "
        f"{m['load_only_s']:.2f} s, ratio {m['compare_s'] / m['load_only_s']:.2f}x"
    )
    print(
        f"peak RSS {m['peak_kib'] / 1024:.1f} MiB = baseline {m['baseline_kib'] / 1024:.1f} MiB + {extra / mib:.1f} MiB; "
        f"largest tensor {largest / mib:.1f} MiB; extra / largest = {extra / largest:.2f}x "
        f"(target < 3x: {'MET' if extra < budget else 'MISSED'})"
    )


if __name__ == "__main__":
    main()
