"""Twin runs on the tiny model: wall time against two plain bench runs, run-to-run noise, the gathered TP=2 dump.

    .venv/bin/python benchmarks/bench_twin.py                      # 32 prompts x 64 tokens, 2 rounds
    .venv/bin/python benchmarks/bench_twin.py --rounds 1 --parts wall,dump

Three parts, each through the CLI in a fresh process, as a user runs them:

- wall: `twin --recipe cpu-tiny --set B:engine.tensor_parallel_size=2` (32 prompts x 64 tokens, both sides
  batch 32, side A repeated once for the noise, no module stage) against two plain `bench` runs of the same
  shape (`--recipe cpu-tiny` and the TP=2 recipe, 32 prompts, input length = the twin prompts' mean, 64
  output tokens, concurrency 32), each launching its own server as the twin does. Rounds alternate the
  order. Target: twin / (bench TP=1 + bench TP=2) <= 1.3.
- noise: the same configuration twice in two server processes (a twin of cpu-tiny against itself with a
  no-op environment variable on side B, so B gets a server of its own), at TP=1 and TP=2, and the same
  server at batch 1 against batch 16: how many prompts diverge and the largest logprob drift, per pair.
- dump: the TP=1 vs TP=2 twin's module stage forced on prompt 0 for 4 steps: the gathered TP=2 dump against
  the TP=1 dump, every module compared, the worst cosine per module kind (every layer's instance together).

Every twin's per-prompt table and verdict are in its run directory (printed); nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TP2 = "B:engine.tensor_parallel_size=2"


def cli(*argv: str) -> float:
    """Run `ascend-workbench ARGV` in a fresh process; its wall seconds (a failed run ends the benchmark)."""
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "workbench.cli", *argv], cwd=REPO, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 1: a twin's error verdict, still a measurement
        sys.exit(f"ascend-workbench {' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return time.monotonic() - began


def twin(out: Path, *flags: str, prompts: int, tokens: int, batch: str = "32") -> dict:
    seconds = cli(
        "twin",
        "--recipe",
        "cpu-tiny",
        *flags,
        "--prompts",
        "humaneval",
        "--num-prompts",
        str(prompts),
        "--max-tokens",
        str(tokens),
        "--batch",
        *batch.split(),
        "--out",
        str(out),
        "--no-progress",
    )
    result = json.loads((out / "twin.json").read_text())
    result["wall_s"] = seconds
    return result


def bench(recipe: str, input_len: int, prompts: int, tokens: int, work: Path) -> float:
    return cli(
        "bench",
        "--recipe",
        recipe,
        "--input-len",
        str(input_len),
        "--output-len",
        str(tokens),
        "--num-prompts",
        str(prompts),
        "--concurrency",
        str(prompts),
        "--no-progress",
        "--json",
        str(work / f"bench-{recipe.rsplit('/', 1)[-1]}-{time.monotonic_ns()}.json"),
    )


def tp2_recipe(work: Path) -> Path:
    """cpu-tiny at TP=2 as a recipe file, for the plain bench run (bench has no --set)."""
    from workbench.recipes import load_serving_recipe

    recipe = load_serving_recipe("cpu-tiny").with_overrides(name="cpu-tiny-tp2", engine={"tensor_parallel_size": 2})
    path = work / "cpu-tiny-tp2.yaml"
    import yaml

    path.write_text(yaml.safe_dump(recipe.model_dump(mode="json", exclude_none=True)))
    return path


def mean_prompt_len(run: Path) -> int:
    plan = json.loads((run / "plan.json").read_text())
    return round(statistics.mean(len(p["token_ids"]) for p in plan["prompts"]))


def describe(label: str, result: dict) -> str:
    s, verdict = result["summary"], result["verdict"]["verdict"]
    return (
        f"{label}: {s['identical']}/{s['prompts']} identical, {s['near_ties']} near ties, {s['diverged']} diverged, "
        f"max drift {s['max_drift']:.3g} nats, verdict {verdict} ({result['wall_s']:.0f} s)"
    )


def part_wall(work: Path, rounds: int, prompts: int, tokens: int) -> None:
    recipe = tp2_recipe(work)
    ratios = []
    for index in range(rounds):
        out = work / f"wall-{index}"
        order = ["twin", "bench"] if index % 2 == 0 else ["bench", "twin"]
        seconds: dict[str, float] = {}
        for what in order:
            if what == "twin":
                result = twin(out, "--set", TP2, "--no-locate", prompts=prompts, tokens=tokens)
                seconds["twin"] = result["wall_s"]
                print(describe(f"round {index} twin TP=1 vs TP=2", result))
            else:
                first = work / "wall-0"  # the humaneval prompts' mean length, once a twin has tokenized them
                length = mean_prompt_len(first) if (first / "plan.json").exists() else 40
                seconds["bench"] = bench("cpu-tiny", length, prompts, tokens, work) + bench(
                    str(recipe), length, prompts, tokens, work
                )
        ratios.append(seconds["twin"] / seconds["bench"])
        print(
            f"round {index} ({' then '.join(order)}): twin {seconds['twin']:.1f} s, two bench runs "
            f"{seconds['bench']:.1f} s, ratio {ratios[-1]:.2f}"
        )
    print(
        f"wall: twin / two bench runs, median of {rounds} rounds: {statistics.median(ratios):.2f} "
        f"(range {min(ratios):.2f}-{max(ratios):.2f}; target <= 1.3)"
    )


def part_noise(work: Path, prompts: int, tokens: int) -> None:
    own = "B:env.ASCEND_WORKBENCH_TWIN_REPEAT=1"  # a no-op variable: side B gets a server process of its own
    print(
        describe(
            "noise TP=1 vs TP=1, two processes", twin(work / "noise-tp1", "--set", own, prompts=prompts, tokens=tokens)
        )
    )
    print(
        describe(
            "noise TP=2 vs TP=2, two processes",
            twin(
                work / "noise-tp2",
                "--set",
                own,
                "--set",
                TP2.replace("B:", "A:"),
                "--set",
                TP2,
                prompts=prompts,
                tokens=tokens,
            ),
        )
    )
    batch = twin(work / "batch", prompts=prompts, tokens=tokens, batch="1 16")
    print(describe("batch 1 vs batch 16, one server", batch))
    noise = batch["noise"]
    print(
        f"  the same server repeated (batch 1): {noise['identical']}/{noise['prompts']} identical, "
        f"max drift {noise['max_drift']:.3g} nats"
    )


def part_dump(work: Path, prompts: int, tokens: int) -> None:
    out = work / "dump"
    cli(
        "twin",
        "--recipe",
        "cpu-tiny",
        "--set",
        TP2,
        "--prompts",
        "humaneval",
        "--num-prompts",
        str(prompts),
        "--max-tokens",
        str(tokens),
        "--out",
        str(out),
        "--locate-prompt",
        "0",
        "--locate-steps",
        "4",
        "--noise-repeats",
        "0",
        "--no-progress",
    )
    located = json.loads((out / "twin.json").read_text())["locate"]
    print(
        f"dump: gathered TP=2 vs TP=1, prompt 0, 4 steps: {located['compared']} module outputs compared, "
        f"{located['errors']} errors; first diverging module: {located['first_module']}"
    )
    for kind, cosine in located["worst_cosine_by_kind"].items():
        print(f"  worst cosine {cosine:.12f}  {kind}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="wall,noise,dump", help="comma-separated: wall, noise, dump")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the wall-time comparison")
    parser.add_argument("--num-prompts", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--work", type=Path, help="where the runs go (default: a temporary directory)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-twin-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"runs in {work}")
    parts = args.parts.split(",")
    if "wall" in parts:
        part_wall(work, args.rounds, args.num_prompts, args.max_tokens)
    if "noise" in parts:
        part_noise(work, args.num_prompts, args.max_tokens)
    if "dump" in parts:
        part_dump(work, args.num_prompts, 16)


if __name__ == "__main__":
    main()
