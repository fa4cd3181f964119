"""Pareto fronts, the best point under the SLO, sensitivity and repeats, on hand-made tables."""

from __future__ import annotations

import pandas as pd
import pytest

from workbench.errors import WorkbenchError
from workbench.sweep.analysis import (
    aggregate_repeats,
    best_under_slo,
    pareto_front,
    point_labels,
    sensitivity,
    slo_mask,
)


def table(rows: list[tuple]) -> pd.DataFrame:
    """rows: (point_id, max_num_seqs, concurrency, output_throughput, p99_ttft_ms, p99_e2el_ms, status)."""
    return pd.DataFrame(
        rows,
        columns=[
            "point_id",
            "max_num_seqs",
            "concurrency",
            "output_throughput",
            "p99_ttft_ms",
            "p99_e2el_ms",
            "status",
        ],
    )


POINTS = table(
    [
        ("a", 2, 1, 100.0, 50.0, 900.0, "ok"),
        ("b", 2, 8, 150.0, 400.0, 1500.0, "ok"),
        ("c", 8, 1, 110.0, 60.0, 800.0, "ok"),
        ("d", 8, 8, 300.0, 200.0, 1200.0, "ok"),
        ("e", 16, 8, 290.0, 250.0, 1300.0, "ok"),  # dominated by d on both axes
        ("f", 16, 1, 105.0, 50.0, 950.0, "ok"),  # ties a on x, better y: dominates a
        ("g", 32, 8, None, None, None, "start_failed"),
    ]
)


def test_pareto_front_vs_ttft():
    front = pareto_front(POINTS, "p99_ttft_ms")
    assert front[front["pareto"]]["point_id"].tolist() == ["f", "c", "d"]
    assert front["point_id"].tolist()[:2] in (["a", "f"], ["f", "a"])  # sorted by x
    assert not front.set_index("point_id").loc["g", "pareto"]


def test_pareto_front_vs_e2e():
    front = pareto_front(POINTS, "p99_e2el_ms")
    assert sorted(front[front["pareto"]]["point_id"]) == ["c", "d"]


def test_pareto_keeps_exact_duplicates():
    dup = table([("x", 1, 1, 10.0, 5.0, 9.0, "ok"), ("y", 1, 1, 10.0, 5.0, 9.0, "ok")])
    assert pareto_front(dup)["pareto"].tolist() == [True, True]


def test_slo_mask_and_best():
    limits = {"p99_ttft_ms": 250.0, "p99_e2el_ms": 1250.0}
    assert slo_mask(POINTS, limits).tolist() == [True, False, True, True, False, True, False]
    assert best_under_slo(POINTS, limits)["point_id"] == "d"
    assert best_under_slo(POINTS, {"p99_ttft_ms": 100.0})["point_id"] == "c"
    assert best_under_slo(POINTS, {"p99_ttft_ms": 10.0}) is None
    assert best_under_slo(POINTS, {})["point_id"] == "d"


def test_best_tie_breaks_on_e2e_latency():
    tied = table(
        [("x", 1, 1, 10.0, 5.0, 90.0, "ok"), ("y", 2, 1, 10.0, 5.0, 80.0, "ok"), ("z", 3, 1, 10.0, 5.0, 80.0, "ok")]
    )
    assert best_under_slo(tied, {})["point_id"] == "y"


def test_unknown_slo_column_is_a_clear_error():
    with pytest.raises(WorkbenchError, match=r"no column\(s\) \['p99_ttft'\]"):
        slo_mask(POINTS, {"p99_ttft": 5.0})


def test_sensitivity_holds_the_other_factor_fixed():
    ok = POINTS[POINTS["point_id"].isin(["a", "b", "c", "d"])]
    sens = sensitivity(ok)
    by = sens.set_index("factor")
    # concurrency at max_num_seqs=2: 100 -> 150 (spread 50/125 = 0.4); at 8: 110 -> 300 (190/205)
    assert by.loc["concurrency", "spread"] == pytest.approx((0.4 + 190.0 / 205.0) / 2)
    # max_num_seqs at concurrency=1: 100 -> 110 (10/105); at 8: 150 -> 300 (150/225)
    assert by.loc["max_num_seqs", "spread"] == pytest.approx((10.0 / 105.0 + 150.0 / 225.0) / 2)
    assert by.loc["max_num_seqs", "best_value"] == 8 and by.loc["concurrency", "best_value"] == 8
    assert sens["factor"].tolist() == ["concurrency", "max_num_seqs"]  # largest spread first
    assert by.loc["concurrency", "groups"] == 2


def test_sensitivity_skips_factors_without_comparable_pairs():
    one = POINTS[POINTS["point_id"].isin(["a", "d"])]  # both factors change together: nothing is comparable
    assert sensitivity(one, factors=["max_num_seqs", "concurrency"]).empty


def test_aggregate_repeats_means_over_repeats():
    frame = pd.DataFrame(
        {
            "point_id": ["p0", "p1", "p2"],
            "server_key": ["k", "k", "k"],
            "max_num_seqs": [4, 4, 4],
            "concurrency": [2, 2, 2],
            "repeat": [0, 1, 2],
            "output_throughput": [10.0, 20.0, 99.0],
            "status": ["ok", "ok", "load_failed"],
        }
    )
    out = aggregate_repeats(frame)
    assert len(out) == 1
    assert out.loc[0, "output_throughput"] == 15.0 and out.loc[0, "repeats"] == 2 and out.loc[0, "point_id"] == "p0"


def test_point_labels_show_only_what_varies():
    labels = point_labels(POINTS.iloc[:2])
    assert labels.tolist() == ["concurrency=1", "concurrency=8"]
    kv = pd.DataFrame({"kv_cache_memory_bytes": [268435456, 2**30], "status": ["ok", "ok"]})
    assert point_labels(kv).tolist() == ["kv_cache_memory_bytes=256MiB", "kv_cache_memory_bytes=1024MiB"]
