"""Intervals for a difference of two means measured over repeated windows (pure; math only).

A side's window is repeated (A, B, A, B, ...); its window means vary run to run, and that variation,
measured, is the noise a difference is judged against. For the windows a_1..a_n of side A and b_1..b_m of
side B, the difference is mean(b) - mean(a); its standard error uses the pooled within-side variance
s² = (Σ(a - ā)² + Σ(b - b̄)²) / (n + m - 2), SE = s · sqrt(1/n + 1/m), and the interval is ± t · SE with
Student's t at n + m - 2 degrees of freedom. Several differences judged together (request classes x
TTFT and TPOT) share one family-wise confidence: each uses 1 - (1 - confidence) / tests (Bonferroni).

Student's t is computed here from the regularized incomplete beta function (the continued fraction of
Numerical Recipes, §6.4), so the workbench needs no statistics package for it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Difference:
    """mean(b) - mean(a) with its interval; `noise` is the pooled within-side standard deviation of a window."""

    a_mean: float
    b_mean: float
    delta: float
    half_width: float  # t · SE; inf when there is no repeat to measure the noise with
    noise: float
    windows: tuple[int, int]

    @property
    def low(self) -> float:
        return self.delta - self.half_width

    @property
    def high(self) -> float:
        return self.delta + self.half_width

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    @property
    def relative(self) -> float:
        return self.delta / self.a_mean if self.a_mean else math.inf

    def to_dict(self) -> dict[str, float | list[int]]:
        return {
            "a": self.a_mean,
            "b": self.b_mean,
            "delta": self.delta,
            "low": self.low,
            "high": self.high,
            "noise": self.noise,
            "windows": list(self.windows),
        }


def difference(a: Sequence[float], b: Sequence[float], confidence: float, tests: int = 1) -> Difference:
    """mean(b) - mean(a) with a family-wise `confidence` interval over `tests` comparisons (see the docstring)."""
    if not a or not b:
        raise ValueError("a difference needs at least one window on each side")
    a_mean, b_mean = sum(a) / len(a), sum(b) / len(b)
    dof = len(a) + len(b) - 2
    if dof < 1:
        return Difference(a_mean, b_mean, b_mean - a_mean, math.inf, math.nan, (len(a), len(b)))
    squares = sum((x - a_mean) ** 2 for x in a) + sum((x - b_mean) ** 2 for x in b)
    noise = math.sqrt(squares / dof)
    error = noise * math.sqrt(1 / len(a) + 1 / len(b))
    level = 1 - (1 - confidence) / (2 * max(tests, 1))
    return Difference(a_mean, b_mean, b_mean - a_mean, t_quantile(level, dof) * error, noise, (len(a), len(b)))


def t_quantile(p: float, dof: int) -> float:
    """The p-quantile of Student's t with `dof` degrees of freedom (p in (0.5, 1)), by bisection on the CDF."""
    if not 0.5 < p < 1 or dof < 1:
        raise ValueError(f"t_quantile needs 0.5 < p < 1 and dof >= 1, got p={p}, dof={dof}")
    low, high = 0.0, 1.0
    while t_cdf(high, dof) < p:
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if t_cdf(middle, dof) < p else (low, middle)
        if high - low < 1e-10 * max(high, 1.0):
            break
    return (low + high) / 2


def t_cdf(t: float, dof: int) -> float:
    """P(T <= t) for Student's t: 1 - I_x(dof/2, 1/2) / 2 with x = dof / (dof + t²), for t >= 0."""
    tail = incomplete_beta(dof / (dof + t * t), dof / 2, 0.5) / 2
    return 1 - tail if t >= 0 else tail


def incomplete_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta I_x(a, b), by its continued fraction (Numerical Recipes §6.4)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _fraction(x, a, b) / a
    return 1 - front * _fraction(1 - x, b, a) / b


def _fraction(x: float, a: float, b: float) -> float:
    """Lentz's evaluation of the incomplete beta's continued fraction."""
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    value = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            value *= d * c
        if abs(d * c - 1) < 1e-14:
            break
    return value


__all__ = ["Difference", "difference", "incomplete_beta", "t_cdf", "t_quantile"]
