"""Side by side and --confirm-best on stored points: overlaps by host and group, the K best, the report."""

from __future__ import annotations

from tests.conftest import REPO_ROOT
from workbench.sweep.interference import best_rows, confirm_table, points_to_confirm, side_by_side
from workbench.sweep.report import build_report, write_html
from workbench.sweep.spec import parse_sweep_spec
from workbench.sweep.store import PointResult, PointStatus


def point(
    pid: str, seqs: int, throughput: float, window, group="cpu:0", host="h1", mode="parallel", ttft=100.0
) -> PointResult:
    return PointResult(
        point_id=pid,
        sweep="s",
        server_key=f"k{seqs}",
        params={"max_num_seqs": seqs},
        workload={
            "input_len": 8,
            "output_len": 4,
            "num_prompts": 4,
            "concurrency": 2,
            "request_rate": None,
            "prefix_ratio": 0.0,
            "seed": 0,
        },
        repeat=0,
        status=PointStatus.OK,
        summary={"output_throughput": throughput, "p99_ttft_ms": ttft, "p99_e2el_ms": 2 * ttft},
        placement={"mode": mode, "group": group, "host": host, "window": list(window)},
    )


RESULTS = [
    point("a", 2, 50.0, (0, 10), group="cpu:0"),
    point("b", 4, 90.0, (5, 20), group="cpu:1"),  # overlaps a for 5 s
    point("c", 8, 70.0, (12, 18), group="cpu:0"),  # overlaps b for 6 s
    point("d", 16, 99.0, (0, 30), group="cpu:1", host="h2"),  # another node: beside nobody
    point("e", 32, 10.0, (40, 50), group="cpu:0"),  # alone
]


def test_side_by_side_needs_same_host_other_group_and_overlapping_windows():
    table = side_by_side(RESULTS).set_index("point_id")
    assert table.loc["a", "beside"] == ("b",) and table.loc["a", "overlap_s"] == 5.0
    assert table.loc["b", "beside"] == ("a", "c") and table.loc["b", "overlap_s"] == 11.0
    assert table.loc["c", "beside"] == ("b",)  # a shares c's group: they ran one after the other
    assert table.loc["d", "beside"] == () and table.loc["e", "overlap_s"] == 0.0
    old = PointResult("z", "s", "k", {}, {}, 0, PointStatus.OK)  # stored before placements: left out
    assert "z" not in set(side_by_side([*RESULTS, old])["point_id"])


def test_points_to_confirm_reruns_only_best_points_that_had_neighbours():
    assert list(best_rows(RESULTS, {"p99_ttft_ms": 500}, 2)["output_throughput"]) == [99.0, 90.0]
    rerun, alone = points_to_confirm(RESULTS, {"p99_ttft_ms": 500}, 3)  # d, b, c
    assert rerun == ["b", "c"] and alone == ["d"]
    slow = [point("a", 2, 50.0, (0, 10), ttft=900.0), point("b", 4, 90.0, (5, 20), group="cpu:1", ttft=900.0)]
    assert points_to_confirm(slow, {"p99_ttft_ms": 500}, 2) == ([], [])  # nothing meets the SLO


def test_confirm_table_ratio_alone_over_side_by_side():
    alone = [point("b", 4, 108.0, (60, 70), group="all", mode="confirm")]
    table = confirm_table(RESULTS, alone)
    row = table.iloc[0]
    assert row["point_id"] == "b" and row["beside"] == 2
    assert row["output_throughput_side_by_side"] == 90.0 and row["output_throughput_alone"] == 108.0
    assert abs(row["throughput_alone_over_side_by_side"] - 1.2) < 1e-12


def test_report_shows_who_ran_beside_whom_and_the_confirmation(tmp_path):
    spec = parse_sweep_spec(
        {
            "name": "s",
            "base": str(REPO_ROOT / "recipes/serving/cpu-tiny.yaml"),
            "grid": {"max_num_seqs": [2, 4, 8, 16, 32]},
            "workload": {"input_len": 8, "output_len": 4, "num_prompts": 4, "concurrency": [2]},
            "slo": {"p99_ttft_ms": 500},
        },
        tmp_path / "s.yaml",
    )
    report = build_report(spec, RESULTS, [point("b", 4, 108.0, (60, 70), group="all", mode="confirm")])
    assert "3 of 5 points ran side by side" in report.interference_text()
    assert "throughput alone / side by side = 1.20-1.20" in report.interference_text()
    beside = dict(zip(report.points["point_id"], report.points["beside"], strict=True))
    assert beside["b"] == "max_num_seqs=2; max_num_seqs=8"
    html = write_html(report, tmp_path / "r.html").read_text()
    assert "Side by side" in html and "re-measured alone" in html
    alone_only = build_report(spec, [point("e", 32, 10.0, (40, 50))])
    assert alone_only.interference_text() == "every point ran alone on its host (1 points)"
