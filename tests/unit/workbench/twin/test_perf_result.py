"""The performance twin's document and words (`twin.perf.result`), and its verb's flags."""

from __future__ import annotations

import pytest

from workbench import cli
from workbench.errors import WorkbenchError
from workbench.profiling.idle_causes import CauseTotal, IdleCause
from workbench.recipes import load_serving_recipe
from workbench.twin.api import PERF_TWIN_KIND, PerfTwinRequest, PerfTwinResult, Side, read_perf_twin
from workbench.twin.perf.attribution import attribute
from workbench.twin.perf.kernels import compare_kernels, notable
from workbench.twin.perf.policy import load_perf_thresholds

from .test_perf_attribution import window
from .test_perf_kernels import BASE, jitter, profile

POLICY = load_perf_thresholds()


def result(tmp_path, *, planted: bool) -> PerfTwinResult:
    recipe = load_serving_recipe("cpu-tiny")
    changes = {"env.ASCEND_BACKEND_FAULT": "silu_and_mul:delay:ms=2"} if planted else {}
    request = PerfTwinRequest(Side.of_recipe("A", recipe), Side.of_recipe("B", recipe, changes), out=tmp_path)
    extra = 8.0 if planted else 0.0
    a = [
        window("A", i, tpot_ms=10.0 + d, ttft_ms=20.0, kernel_us=4000, idle_us=5000)
        for i, d in enumerate((0, 0.1, -0.1))
    ]
    b = [
        window("B", i, tpot_ms=10.0 + extra + d, ttft_ms=20.0, kernel_us=4000 + 1000 * extra, idle_us=5000)
        for i, d in enumerate((0, 0.1, -0.1))
    ]
    ops_b = {**BASE, "planted::silu_and_mul": (40, 80000.0)} if planted else BASE
    kernels = compare_kernels([profile(BASE)] * 2, [profile(jitter(ops_b, 1.0))] * 2, POLICY)
    idle = {"B": (CauseTotal("0", IdleCause.HOST_DISPATCH, 10, 900.0, 90.0, 0.9, "inside the steps"),)}
    return PerfTwinResult(
        directory=tmp_path,
        request=request,
        windows=tuple(a + b),
        attribution=attribute(a, b, request.workload.classes(), POLICY),
        kernels=kernels,
        notable_kernels=tuple(notable(kernels, 8000.0, POLICY)),
        modules=(),
        idle=idle,
        slow_ranks={},
        profiler_cost={"A": 0.05, "B": 0.04},
        export_cost={"A": 0.3, "B": 0.25},
        notes=(),
        wall_s=1.0,
    )


def test_a_planted_delay_reads_as_slower_tpot_in_the_kernel_bucket_naming_the_op(tmp_path):
    found = result(tmp_path, planted=True)
    text = found.text()
    assert "B is slower on TPOT" in text and "cause: kernel" in text
    assert "planted::silu_and_mul (new, op silu_and_mul" in text
    assert "cost on the step time inside its window: A +5%, B +4% (whole profiled load: A +30%, B +25%)" in text
    written = read_perf_twin(found.write().parent)
    assert PERF_TWIN_KIND.matches(written) and written["differs"] and written["causes"]["TPOT"] == "kernel"
    assert written["kernels"][0]["kernel"] == "planted::silu_and_mul"


def test_an_aa_result_says_no_difference(tmp_path):
    found = result(tmp_path, planted=False)
    assert found.headline()[0].startswith("no difference between A") and not found.differs


def test_reading_another_kind_is_refused(tmp_path):
    (tmp_path / "perf-twin.json").write_text('{"kind": "twin", "schema_version": 1}')
    with pytest.raises(WorkbenchError, match="is a 'twin' result"):
        read_perf_twin(tmp_path)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["twin", "--perf", "--recipe", "cpu-tiny", "--batch", "4"], "--batch is the token twin's"),
        (["twin", "--perf", "--recipe", "cpu-tiny", "--repeats", "0"], "noise is measured"),
        (["twin", "--perf", "--recipe", "cpu-tiny", "--input-len", "64", "64"], "no repeats"),
        (["twin", "--perf", "--recipe", "cpu-tiny", "--profile-steps", "1"], "--profile-steps"),
    ],
)
def test_bad_perf_flags_get_one_clear_line_before_any_server_starts(argv, words, capsys):
    assert cli.main(argv) == 2
    assert words in capsys.readouterr().err
