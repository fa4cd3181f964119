"""A parallel sweep on real vLLM CPU servers: two groups of one core each, the tiny model twice.

`--parallel 2` runs the spec of sweep_support (two server configurations, two points each) with both
servers at once (about 75 s per start here): every point complete with the content the spec implies, the
points recorded as run side by side, and a second run over the same folder resumes with nothing to
measure. A driver SIGKILLed mid-sweep loses no finished point: the store and resume logic are the same in
every mode, and test_sweep.py kills a real sweep's driver and resumes it. The Ray path of the same spec is
test_ray_sweep.py; the speed comparison with a serial sweep is benchmarks/bench_parallel_sweep.py.
"""

from __future__ import annotations

from tests.integration.sweep_support import (
    MARKS,
    content,
    expected_content,
    new_sweep,
    points_beside_the_other_group,
    side_by_side_ok,
    wait_gone,
)
from workbench.sweep.report import build_report
from workbench.sweep.runner import Execution, run_sweep
from workbench.sweep.spec import expand

pytestmark = MARKS


def test_two_groups_of_one_core_measure_every_point_and_resume(server_env, tmp_path):
    spec, env = new_sweep(tmp_path, server_env)
    outcome = run_sweep(spec, tmp_path / "par", progress=False, extra_env=env, execution=Execution(parallel=2))
    assert outcome.missing == ()
    assert content(outcome.results) == expected_content(spec)
    assert {r.placement["mode"] for r in outcome.results} == {"parallel"}
    side_by_side_ok(outcome.results)
    assert all(r.summary["output_throughput"] > 0 for r in outcome.results)
    # each configuration's server started once, for its first point; its second point reused it
    assert sorted(r.timings["server_start_s"] > 0 for r in outcome.results) == [False, False, True, True]
    # How many points overlapped a point of the other group depends on how fast each server came up (in
    # CI one configuration's second point once ran after the other's had finished); the report must count
    # exactly the points whose recorded windows overlap, which includes both first points.
    overlapping = points_beside_the_other_group(outcome.results)
    assert overlapping >= 2
    report = build_report(spec, outcome.results)
    assert f"{overlapping} of 4 points ran side by side" in report.interference_text()
    assert wait_gone(env) == []
    print(f"\nparallel 2: {outcome.wall_s:.1f} s")

    again = run_sweep(spec, tmp_path / "par", progress=False, extra_env=env, execution=Execution(parallel=2))
    assert again.measured == () and sorted(again.skipped) == sorted(p.point_id for p in expand(spec))
    assert content(again.results) == content(outcome.results)
