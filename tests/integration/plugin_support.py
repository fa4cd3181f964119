"""Run one offline vLLM engine in a child process and collect what the plugin tests compare.

`run_engine(RunSpec(...))` starts `python -m tests.integration.plugin_support` in its own process
group (so the EngineCore and worker processes vLLM forks are in it too), waits, and always kills the
whole group afterwards. The child generates greedily for PROMPTS and writes token ids and the
chosen tokens' logprobs as JSON; the parent adds the op stats files the plugin wrote.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ascend_backend.vllm_plugin.stats import OpStats, read_op_stats

REPO_ROOT = Path(__file__).resolve().parents[2]
PROMPTS = (
    "The capital of France is",
    "Write a Python function that reverses a string.",
    "Three facts about the moon:",
    "Once upon a time, in a small village,",
)
MAX_TOKENS = 32


@dataclass(frozen=True)
class RunSpec:
    name: str
    model: Path
    compiled: bool
    plugin: bool
    workdir: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 1500.0

    @property
    def stats_prefix(self) -> Path:
        return self.workdir / f"{self.name}-stats" / "ops"


@dataclass(frozen=True)
class RunResult:
    spec: RunSpec
    tokens: list[list[int]]  # per prompt, MAX_TOKENS generated ids
    logprobs: list[list[float]]  # logprob of each generated token (NaN stays NaN)
    stats: OpStats
    log: Path

    def has_nan_logprob(self) -> bool:
        return any(math.isnan(lp) for row in self.logprobs for lp in row)


def engine_env(spec: RunSpec) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("ASCEND_BACKEND_")}
    env = {
        **inherited,
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CPU_OMP_THREADS_BIND": os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "0-1"),
        # The AOT compile cache key does not include ascend_backend's switches: compile afresh.
        "VLLM_DISABLE_COMPILE_CACHE": "1",
        "ASCEND_BACKEND_STATS_FILE": str(spec.stats_prefix),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
        **spec.extra_env,
    }
    if spec.plugin:
        env.pop("VLLM_PLUGINS", None)
    else:
        env["VLLM_PLUGINS"] = ""  # vLLM's allow-list: empty loads no general plugin
    return env


def run_engine(spec: RunSpec) -> RunResult:
    spec.stats_prefix.parent.mkdir(parents=True, exist_ok=True)
    out_json, log = spec.workdir / f"{spec.name}.json", spec.workdir / f"{spec.name}.log"
    argv = [
        sys.executable,
        "-m",
        "tests.integration.plugin_support",
        "--model",
        str(spec.model),
        "--out",
        str(out_json),
    ]
    if spec.compiled:
        argv.append("--compiled")
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=engine_env(spec), stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = proc.wait(timeout=spec.timeout_s)
        finally:
            _kill_group(proc.pid)
    if code != 0 or not out_json.exists():
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"engine run {spec.name!r} failed (exit {code}); log {log}:\n{tail}")
    payload = json.loads(out_json.read_text())
    return RunResult(spec, payload["tokens"], payload["logprobs"], read_op_stats(spec.stats_prefix), log)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def generate(model: str, compiled: bool) -> dict[str, list]:
    from vllm import LLM, SamplingParams

    # float32: in bf16, two correct kernels (vLLM's C++ attention and RoPE vs the registry's PyTorch ones)
    # round differently, and greedy decoding flips at the first near-tie of the top two logits; in
    # float32 the per-op differences are ~1e-6 and the tokens must agree. float32 on CPU is also the
    # project's accuracy reference.
    llm = LLM(
        model=model,
        dtype="float32",
        enforce_eager=not compiled,
        max_model_len=512,
        block_size=32,
        max_num_seqs=4,
        seed=0,
    )
    outputs = llm.generate(
        list(PROMPTS), SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, ignore_eos=True, logprobs=0)
    )
    tokens, logprobs = [], []
    for out in outputs:
        completion = out.outputs[0]
        tokens.append(list(completion.token_ids))
        logprobs.append(
            [float(step[tok].logprob) for tok, step in zip(completion.token_ids, completion.logprobs, strict=True)]
        )
    return {"tokens": tokens, "logprobs": logprobs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--compiled", action="store_true")
    args = parser.parse_args()
    result = generate(args.model, args.compiled)
    Path(args.out).write_text(json.dumps(result, allow_nan=True))


if __name__ == "__main__":
    main()
