"""Our metrics agree with msprobe's own numbers: its CSV on real dumps, and its functions called directly."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest
import torch

from tests.conftest import FIXTURES
from workbench.accuracy.metrics import compare_tensors

MSPROBE = FIXTURES / "msprobe"
BF16_TENSORS = MSPROBE / "dump_bf16" / "step0" / "proc12428" / "dump_tensor_data"
FP32_TENSORS = MSPROBE / "dump_fp32" / "step0" / "proc12380" / "dump_tensor_data"

# CSV column -> our field; msprobe writes 12 decimals, so agreement is to ~1e-12 absolute.
COLUMNS = {
    "Cosine": "msprobe_rounded_cosine",
    "EucDist": "euclidean_distance",
    "MaxAbsErr": "max_abs_err",
    "MaxRelativeErr": "max_rel_err",
    "One Thousandth Err Ratio": "one_thousandth_ratio",
    "Five Thousandths Err Ratio": "five_thousandth_ratio",
}


def _csv_rows() -> list[dict[str, str]]:
    with open(MSPROBE / "compare_result_fp32_vs_bf16_tensor.csv", newline="") as f:
        return [row for row in csv.DictReader(f) if row["Cosine"] != "unsupported"]


def test_sample_tensors_reproduce_msprobe_compare_csv():
    rows = _csv_rows()
    assert len(rows) == 10  # every tensor row of the sample; the one str kwarg row is "unsupported"
    worst = dict.fromkeys(COLUMNS, 0.0)
    for row in rows:
        test = torch.load(BF16_TENSORS / f"{row['NPU Name']}.pt", weights_only=True)
        reference = torch.load(FP32_TENSORS / f"{row['Bench Name']}.pt", weights_only=True)
        result = compare_tensors(test, reference)
        assert result.test_dtype == row["NPU Dtype"] and result.reference_dtype == row["Bench Dtype"]
        for column, field in COLUMNS.items():
            expected = float(row[column])
            worst[column] = max(worst[column], abs(getattr(result, field) - expected) / max(1.0, abs(expected)))
    print("max disagreement with msprobe's CSV (relative, floor 1):", worst)
    assert max(worst.values()) < 1e-9, worst


def _msprobe_columns(test: torch.Tensor, reference: torch.Tensor) -> list:
    """msprobe compare_by_op after reading: bf16 -> float32 numpy, validate (NaN handling), the six algorithms."""
    from msprobe.core.common.const import CompareConst
    from msprobe.core.compare.npy_compare import CompareResult, ValidateTensor, compare_ops_apply

    def as_numpy(t: torch.Tensor) -> np.ndarray:
        return (t.float() if t.dtype == torch.bfloat16 else t).numpy().copy()

    checked = ValidateTensor().check_tensor(CompareResult(as_numpy(test), as_numpy(reference)))
    values, _ = compare_ops_apply(
        checked.n_value,
        checked.b_value,
        checked.error_flag,
        checked.err_msg,
        column_names=CompareConst.ALL_COMPARE_INDEX,
    )
    return values


def _cases() -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(11)
    ref = torch.randn(3000, generator=gen)
    with_zeros = ref.clone()
    with_zeros[::17] = 0
    nan_both_ref = ref.clone()
    nan_both_ref[[5, 900]] = math.nan
    nan_both_ref[77] = math.inf
    nan_both_test = (nan_both_ref * (1 + 1e-4)).clone()
    return [
        ("bf16 vs fp32", ref.to(torch.bfloat16), ref),
        ("fp16 vs fp16", (ref * 3).to(torch.float16), (ref * 3 + 1e-3).to(torch.float16)),
        ("fp32 noisy", ref + 1e-4 * torch.randn(3000, generator=gen), ref),
        ("zeros in reference", with_zeros.to(torch.bfloat16), with_zeros),
        ("zeros vs zeros", torch.zeros(40, 3), torch.zeros(40, 3)),
        ("matched NaN/Inf", nan_both_test, nan_both_ref),
        (
            "2-d fp64",
            torch.randn(30, 20, generator=gen, dtype=torch.float64),
            torch.randn(30, 20, generator=gen, dtype=torch.float64),
        ),
    ]


@pytest.mark.parametrize("name", [c[0] for c in _cases()])
def test_msprobe_compare_functions_called_directly_agree(name):
    pytest.importorskip("msprobe")
    _, test, reference = next(c for c in _cases() if c[0] == name)
    expected = _msprobe_columns(test, reference)
    result = compare_tensors(test, reference)
    ours = [
        result.msprobe_rounded_cosine,
        result.euclidean_distance,
        result.max_abs_err,
        result.max_rel_err,
        result.one_thousandth_ratio,
        result.five_thousandth_ratio,
    ]
    for column, mine, theirs in zip(COLUMNS, ours, expected, strict=True):
        theirs = float(theirs)
        assert mine == pytest.approx(theirs, rel=1e-9, abs=1e-11), (column, mine, theirs)


def _checker_cases() -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    """(name, test, reference) pairs spanning the checker's branches; reference dtype = what msprobe expects."""
    gen = torch.Generator().manual_seed(12)
    one_two = 1 + torch.rand(2000, generator=gen)
    tens = 10 + 10 * torch.rand(2000, generator=gen)
    spread = torch.randn(2000, generator=gen)
    return [
        ("bf16 rounding -> warning", one_two.to(torch.bfloat16), one_two),
        ("bf16 small abs -> pass", (one_two * 1e-2).to(torch.bfloat16), one_two * 1e-2),
        ("bf16 noisy -> error", (spread * (1 + 0.02 * torch.randn(2000, generator=gen))).to(torch.bfloat16), spread),
        (
            "fp16 -> pass",
            (tens * (1 + 1e-4 * torch.randn(2000, generator=gen))).to(torch.float16),
            tens.to(torch.float16),
        ),
        ("fp16 -> warning", (tens * (1 + 3e-3)).to(torch.float16), tens.to(torch.float16)),
        ("fp32 -> warning", tens * (1 + 5e-4), tens),
        ("fp32 -> error", tens * (1 + 2e-3), tens),
        ("fp32 -> pass", tens * (1 + 1e-5), tens),
        ("fp32 random -> error (cosine)", spread, torch.randn(2000, generator=gen)),
    ]


@pytest.mark.parametrize("name", [c[0] for c in _checker_cases()])
def test_verdict_agrees_with_msprobe_api_accuracy_checker(name, tmp_path):
    pytest.importorskip("msprobe")
    from msprobe.pytorch.api_accuracy_checker.compare.compare import Comparator
    from msprobe.pytorch.api_accuracy_checker.compare.compare_column import CompareColumn

    _, test, reference = next(c for c in _checker_cases() if c[0] == name)
    comparator = Comparator(str(tmp_path / "result.csv"), str(tmp_path / "details.csv"), True)
    status, _, message = comparator._compare_torch_tensor(
        "Functional.linear.0.forward", reference, test, CompareColumn(), False
    )
    result = compare_tensors(test, reference)
    assert result.verdict.value == status, (result.verdict_reason, message)
    assert name.split("-> ")[1].startswith(status)
