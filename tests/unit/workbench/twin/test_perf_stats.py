"""Intervals of the performance twin (`twin.perf.stats`): Student's t against its published table, by hand."""

from __future__ import annotations

import math

import pytest

from workbench.twin.perf.stats import difference, incomplete_beta, t_quantile


@pytest.mark.parametrize(
    ("p", "dof", "table"),
    [
        (0.975, 1, 12.706),
        (0.975, 2, 4.303),
        (0.975, 4, 2.776),
        (0.975, 10, 2.228),
        (0.995, 2, 9.925),
        (0.95, 30, 1.697),
        (0.995, 60, 2.660),
    ],
)
def test_t_quantiles_match_the_published_table(p, dof, table):
    assert t_quantile(p, dof) == pytest.approx(table, abs=5e-4)


def test_the_incomplete_beta_has_its_closed_forms():
    assert incomplete_beta(0.3, 1, 1) == pytest.approx(0.3)  # uniform
    assert incomplete_beta(0.3, 2, 1) == pytest.approx(0.09)  # x^a for b = 1
    assert incomplete_beta(0.25, 0.5, 0.5) == pytest.approx(2 / math.pi * math.asin(0.5))


def test_a_difference_by_hand():
    found = difference([10.0, 12.0], [20.0, 22.0], confidence=0.95)
    # pooled variance (2 + 2) / 2 = 2; SE = sqrt(2) * sqrt(1/2 + 1/2); t(0.975, 2) = 4.303
    assert (found.delta, found.noise) == (10.0, pytest.approx(math.sqrt(2)))
    assert found.half_width == pytest.approx(4.3027 * math.sqrt(2), rel=1e-4)
    assert found.excludes_zero and found.relative == pytest.approx(10 / 11)


def test_more_tests_widen_each_interval_and_one_window_a_side_measures_no_noise():
    one = difference([10.0, 12.0, 11.0], [13.0, 15.0, 14.0], 0.95)  # noise 1, delta 3: t(0.975, 4) SE = 2.27
    four = difference([10.0, 12.0, 11.0], [13.0, 15.0, 14.0], 0.95, tests=4)  # t(1 - 0.05/8, 4) SE = 3.52
    assert four.half_width > one.half_width and one.excludes_zero and not four.excludes_zero
    alone = difference([10.0], [12.0], 0.95)
    assert alone.half_width == math.inf and not alone.excludes_zero and math.isnan(alone.noise)
