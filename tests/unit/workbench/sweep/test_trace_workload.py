"""A sweep's output-guard line, from points whose summaries carry the guard's counts."""

from __future__ import annotations

import yaml

from workbench.serving.guard import GuardSummary, check_output
from workbench.sweep.report import build_report
from workbench.sweep.spec import expand, load_sweep_spec
from workbench.sweep.store import PointResult, PointStatus, ResultStore
from workbench.sweep.trace_workload import guard_fields

SPEC = {
    "name": "g",
    "base": "cpu-tiny",
    "workload": {"input_len": 16, "output_len": 4, "num_prompts": 4, "concurrency": [1, 4]},
}


def test_the_report_says_how_many_sampled_answers_looked_broken_and_where(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    spec = load_sweep_spec(path)
    store = ResultStore(tmp_path / "results.jsonl")
    for point in expand(spec):
        broken = point.workload.concurrency == 4
        guard = GuardSummary.of([check_output("!" * 50 if broken else "fine text.") for _ in range(4)])
        result = type("R", (), {"guard": guard})()
        store.append(
            PointResult(
                point.point_id,
                "g",
                point.server_key,
                point.params_dict,
                point.workload.identity(),
                0,
                PointStatus.OK,
                summary={"output_throughput": 10.0, **guard_fields(result)},
            )
        )
    report = build_report(spec, store.read())
    assert report.guard_text() == "guard: 4 of 8 sampled answers look broken at concurrency=4"
    assert "guard_flagged" in report.points_table().columns
