"""compare_tensors on hand-computed cases, against an independent float64 formula written here."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from workbench.accuracy import metrics
from workbench.accuracy.metrics import compare_tensors
from workbench.errors import WorkbenchError
from workbench.results.verdict import Verdict


def reference_metrics(test: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    """The definitions of the metrics module docstring, written plainly in float64 numpy (finite data)."""
    t, r = test.astype(np.float64).ravel(), ref.astype(np.float64).ravel()
    diff = t - r
    nt, nr = np.sqrt((t * t).sum()), np.sqrt((r * r).sum())
    zero_norm = np.finfo(np.float64).eps  # the docstring's (and msprobe's) "all-zero" test, not == 0
    if nt <= zero_norm and nr <= zero_norm:
        cosine = 1.0
    elif nt <= zero_norm or nr <= zero_norm:
        cosine = math.nan
    else:
        cosine = float((t * r).sum() / (nt * nr))
    rel_type = np.float32 if max(test.dtype.itemsize, ref.dtype.itemsize) <= 4 else np.float64
    eps = np.finfo(rel_type).eps
    tr, rr = t.astype(rel_type), r.astype(rel_type)
    zero = rr == 0
    tr = np.where(zero, tr + eps, tr)
    rr = np.where(zero, rr + eps, rr)
    rel = np.abs((tr - rr) / rr)
    return {
        "cosine": cosine,
        "euclidean_distance": float(np.sqrt((diff * diff).sum())),
        "rmse": float(np.sqrt((diff * diff).mean())),
        "max_abs_err": float(np.abs(diff).max()),
        "max_rel_err": float(rel.max()),
        "one_thousandth_ratio": float((rel < 0.001).mean()),
        "five_thousandth_ratio": float((rel < 0.005).mean()),
    }


def assert_matches_reference(result: metrics.TensorComparison, test: np.ndarray, ref: np.ndarray) -> None:
    expected = reference_metrics(test, ref)
    for name, value in expected.items():
        got = getattr(result, name)
        if math.isnan(value):
            assert math.isnan(got), name
        else:
            assert got == pytest.approx(value, rel=1e-9, abs=1e-12), name


def test_identical_tensors_are_perfect_and_pass():
    x = torch.randn(64, 33, generator=torch.Generator().manual_seed(0))
    result = compare_tensors(x, x.clone())
    assert result.cosine == pytest.approx(1.0, abs=1e-15)
    assert (result.max_abs_err, result.max_rel_err, result.euclidean_distance, result.rmse) == (0.0, 0.0, 0.0, 0.0)
    assert (result.one_thousandth_ratio, result.five_thousandth_ratio) == (1.0, 1.0)
    assert result.verdict is Verdict.PASS
    assert result.shape == (64, 33) and result.numel == 64 * 33


def test_bf16_rounding_of_values_in_one_to_two_is_a_warning():
    # bf16 keeps 8 significant bits: on [1, 2) the spacing is 2**-7, so rounding errs by <= 2**-8 ~ 0.0039
    # (absolute and relative): every element is under 1% (no error) but far fewer than 99.9% are under 0.1%
    # -> warning; the absolute error exceeds 0.001, so the max-abs shortcut does not apply.
    x = 1 + torch.rand(4096, generator=torch.Generator().manual_seed(1))
    test = x.to(torch.bfloat16)
    result = compare_tensors(test, x)
    assert_matches_reference(result, test.float().numpy(), x.numpy())
    assert result.max_rel_err <= 2**-8 + 1e-7
    assert result.max_abs_err > 0.001
    assert result.five_thousandth_ratio == 1.0
    assert 0.2 < result.one_thousandth_ratio < 0.8
    assert result.error_share == 1.0
    assert result.verdict is Verdict.WARNING, result.verdict_reason


def test_fp16_rounding_passes_on_relative_shares_even_when_abs_error_is_large():
    # fp16 keeps 11 significant bits: relative error <= 2**-11 < 0.001 everywhere -> pass, although on
    # [10, 20) the absolute error reaches 2**-7 > 0.001.
    x = 10 + 10 * torch.rand(4096, generator=torch.Generator().manual_seed(2))
    test = x.to(torch.float16)
    result = compare_tensors(test, x)
    assert_matches_reference(result, test.numpy(), x.numpy())
    assert result.max_abs_err > 0.001
    assert result.one_thousandth_ratio == 1.0
    assert result.verdict is Verdict.PASS, result.verdict_reason


def test_fp32_rule_is_one_order_stricter():
    # The same fp16-sized errors carried in a float32 tensor: all under 0.001 (no error) but not under 0.0001.
    x = 10 + 10 * torch.rand(4096, generator=torch.Generator().manual_seed(2))
    test = x.to(torch.float16).to(torch.float32)
    result = compare_tensors(test, x)
    assert result.verdict is Verdict.WARNING, result.verdict_reason
    assert "single rule" in result.verdict_reason


def test_one_outlier_in_a_thousand():
    ref = torch.linspace(1, 2, 1000, dtype=torch.float32)
    test = ref.clone()
    test[123] += 1.0  # small enough to keep cosine above 0.99
    result = compare_tensors(test, ref)
    assert_matches_reference(result, test.numpy(), ref.numpy())
    assert result.max_abs_err == pytest.approx(1.0, abs=1e-6)
    assert result.euclidean_distance == pytest.approx(1.0, abs=1e-6)
    assert result.rmse == pytest.approx(1.0 / math.sqrt(1000), rel=1e-5)
    assert result.cosine > 0.99
    assert result.one_thousandth_ratio == 999 / 1000
    # float32 rule: the share under 0.001 must *exceed* 0.999; exactly 0.999 is an error.
    assert result.verdict is Verdict.ERROR
    assert "0.999000" in result.verdict_reason


def test_zeros_vs_zeros_agree_perfectly():
    z = torch.zeros(3, 5)
    result = compare_tensors(z, z.clone())
    assert result.cosine == 1.0
    assert (result.max_abs_err, result.max_rel_err, result.one_thousandth_ratio) == (0.0, 0.0, 1.0)
    assert result.verdict is Verdict.PASS


def test_zeros_vs_nonzero_reference_has_no_cosine_and_is_an_error():
    ref = torch.full((10,), 0.5)
    result = compare_tensors(torch.zeros(10), ref)
    assert math.isnan(result.cosine)
    assert result.max_rel_err == 1.0 and result.one_thousandth_ratio == 0.0
    assert result.verdict is Verdict.ERROR


def test_nonzero_test_against_zero_reference_uses_eps_denominator():
    # msprobe adds float32 eps to both sides where the reference is 0: (t + eps - eps) / eps = t / eps.
    result = compare_tensors(torch.tensor([1.0, 0.25, 1e-3]), torch.tensor([1.0, 0.0, 1e-3]))
    eps = np.finfo(np.float32).eps
    assert result.max_rel_err == pytest.approx(float(np.float32(np.float32(0.25) + eps) - eps) / eps, rel=1e-6)
    assert result.one_thousandth_ratio == pytest.approx(2 / 3)


def test_nan_in_one_side_only_makes_metrics_nan_and_the_verdict_error():
    ref = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    test = ref.clone()
    test[1, 2, 0] = math.nan
    test[1, 2, 3] = math.inf
    result = compare_tensors(test, ref)
    assert not result.nonfinite_positions_match
    for name in ("cosine", "max_abs_err", "max_rel_err", "one_thousandth_ratio", "euclidean_distance", "rmse"):
        assert math.isnan(getattr(result, name)), name
    assert result.verdict is Verdict.ERROR and "NaN/Inf positions differ" in result.verdict_reason
    assert (result.test_nonfinite.nan_count, result.test_nonfinite.inf_count) == (1, 1)
    assert result.test_nonfinite.first_nan == (1, 2, 0)
    assert result.test_nonfinite.first_inf == (1, 2, 3)
    assert not result.reference_nonfinite.any


def test_nan_at_the_same_positions_counts_as_agreement():
    ref = torch.linspace(-1, 1, 50)
    test = ref * (1 + 1e-5)
    for t in (test, ref):
        t[7] = math.nan
        t[30] = -math.inf
    result = compare_tensors(test, ref)
    assert result.nonfinite_positions_match
    zeroed_t, zeroed_r = test.clone(), ref.clone()
    for t in (zeroed_t, zeroed_r):
        t[7] = 0
        t[30] = 0
    assert_matches_reference(result, zeroed_t.numpy(), zeroed_r.numpy())
    assert result.test_nonfinite.first_nan == (7,) and result.reference_nonfinite.first_inf == (30,)
    assert result.verdict is Verdict.PASS


def test_chunked_accumulation_equals_one_pass(monkeypatch):
    gen = torch.Generator().manual_seed(3)
    ref = torch.randn(1000, generator=gen)
    test = (ref + 1e-3 * torch.randn(1000, generator=gen)).to(torch.bfloat16)
    whole = compare_tensors(test, ref)
    monkeypatch.setattr(metrics, "CHUNK_ELEMENTS", 7)
    chunked = compare_tensors(test, ref)
    for name in ("cosine", "euclidean_distance", "max_abs_err", "max_rel_err", "one_thousandth_ratio", "error_share"):
        assert getattr(chunked, name) == pytest.approx(getattr(whole, name), rel=1e-12), name
    assert chunked.verdict is whole.verdict


def test_first_nan_position_found_in_a_later_chunk(monkeypatch):
    monkeypatch.setattr(metrics, "CHUNK_ELEMENTS", 16)
    ref = torch.ones(10, 10)
    test = ref.clone()
    test[6, 3] = math.nan
    test[8, 1] = math.nan
    result = compare_tensors(test, ref)
    assert result.test_nonfinite.nan_count == 2 and result.test_nonfinite.first_nan == (6, 3)


def test_integer_tensors_must_be_equal():
    a = torch.arange(10)
    assert compare_tensors(a, a.clone()).verdict is Verdict.PASS
    b = a.clone()
    b[4] = 99
    result = compare_tensors(b, a)
    assert result.verdict is Verdict.ERROR and "1 of 10" in result.verdict_reason


def test_low_cosine_is_an_error_before_anything_else():
    gen = torch.Generator().manual_seed(4)
    result = compare_tensors(torch.randn(256, generator=gen), torch.randn(256, generator=gen))
    assert result.verdict is Verdict.ERROR and result.verdict_reason.startswith("cosine")


def test_shape_mismatch_names_both_shapes():
    with pytest.raises(WorkbenchError, match=r"\[2, 3\] vs reference \[3, 2\]"):
        compare_tensors(torch.zeros(2, 3), torch.zeros(3, 2))


def test_single_element_has_no_cosine_but_other_metrics():
    result = compare_tensors(torch.tensor([2.0]), torch.tensor([1.0]))
    assert math.isnan(result.cosine)
    assert result.max_abs_err == 1.0 and result.max_rel_err == 1.0


def test_numpy_inputs_are_accepted_and_to_dict_is_flat():
    result = compare_tensors(np.ones((2, 2), dtype=np.float32), np.ones((2, 2), dtype=np.float32))
    row = result.to_dict()
    assert row["verdict"] == "pass" and row["shape"] == [2, 2] and row["test_first_nan"] is None


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(st.floats(-1e3, 1e3, allow_nan=False, width=32), min_size=2, max_size=200),
    noise=st.floats(0, 0.05),
    seed=st.integers(0, 2**16),
)
# Subnormal data (norms ~4e-43, nonzero but below float64 eps): "all-zero" by the documented rule, so
# cosine 1.0. Found by Hypothesis in CI after the reference formula had tested norms == 0.
@example(values=[3.110882590801094e-43, 3.110882590801094e-43], noise=0.03125, seed=0)
def test_metrics_match_the_float64_formula(values, noise, seed):
    ref = torch.tensor(values, dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed)
    test = ref * (1 + noise * torch.randn(ref.shape, generator=gen))
    result = compare_tensors(test, ref)
    assert_matches_reference(result, test.numpy(), ref.numpy())
