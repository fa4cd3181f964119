"""capture_dump writes what the model computed, in execution order, and reads back identically."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

from tests.unit.workbench.accuracy.conftest import EXECUTION_ORDER
from workbench.accuracy.dump import capture_dump, open_dump
from workbench.accuracy.dump_compare import compare_dumps
from workbench.accuracy.dump_format import DumpMode, WorkbenchDump
from workbench.errors import WorkbenchError


def _expected_outputs(net, x) -> dict[str, torch.Tensor]:
    """The same forward pass written out by hand, layer by layer."""
    out = {}
    with torch.no_grad():
        h = out["embed"] = net.embed(x)
        for i, block in enumerate(net.blocks):
            n = out[f"blocks.{i}.norm"] = block.norm(h)
            f = out[f"blocks.{i}.fc"] = block.fc(n)
            h = out[f"blocks.{i}"] = h + f
        out["head"] = out["<root>"] = net.head(h)
    return out


def test_round_trip_keeps_order_tensors_and_stats(small_net, small_input, tmp_path):
    summary = capture_dump(small_net, small_input, tmp_path / "d", prompt_token_ids=[5, 6, 7], prompt="hi")
    assert summary.record_count == len(EXECUTION_ORDER)
    dump = open_dump(tmp_path / "d")
    assert isinstance(dump, WorkbenchDump)
    assert [r.module for r in dump.records] == EXECUTION_ORDER
    assert dump.prompt_token_ids == (5, 6, 7) and dump.header.prompt == "hi"
    assert dump.header.versions["torch"] == torch.__version__
    expected = _expected_outputs(small_net, small_input)
    for record in dump.records:
        tensor = dump.load(record)
        torch.testing.assert_close(tensor, expected[record.module], rtol=0, atol=0)
        values = expected[record.module].double().numpy()
        assert record.stats.max == pytest.approx(values.max(), abs=0)
        assert record.stats.min == pytest.approx(values.min(), abs=0)
        assert record.stats.mean == pytest.approx(values.mean(), rel=1e-12)
        assert record.stats.norm == pytest.approx(np.sqrt((values**2).sum()), rel=1e-12)
        assert (record.nan_count, record.inf_count, record.nonfinite, record.inputs_nonfinite) == (0, 0, False, False)
        assert record.shape == (3, 5, 16) or record.module in ("head", "<root>")
        assert record.key == f"{record.module}.output.0"


def test_a_dump_compared_with_itself_passes_everywhere(small_net, small_input, tmp_path):
    capture_dump(small_net, small_input, tmp_path / "d")
    result = compare_dumps(tmp_path / "d", tmp_path / "d")
    assert list(result.table["module"]) == EXECUTION_ORDER
    assert set(result.table["verdict"]) == {"pass"}
    assert result.summary.first_divergence is None and result.summary.nan_origin is None
    assert (result.table["max_abs_err"] == 0).all()


def test_stats_only_writes_no_tensors_and_compares_on_statistics(small_net, small_input, tmp_path):
    capture_dump(small_net, small_input, tmp_path / "s", stats_only=True)
    assert list((tmp_path / "s" / "tensors").iterdir()) == []
    dump = open_dump(tmp_path / "s")
    assert dump.mode is DumpMode.STATS and all(r.file is None for r in dump.records)
    with pytest.raises(WorkbenchError, match="stats-only"):
        dump.load(dump.records[0])
    capture_dump(small_net, small_input, tmp_path / "t")
    result = compare_dumps(tmp_path / "t", tmp_path / "s")
    assert result.summary.mode == "stats" and set(result.table["verdict"]) == {"pass"}
    assert (result.table["norm_rel_diff"] == 0).all()


def test_module_patterns_select_by_fnmatch(small_net, small_input, tmp_path):
    summary = capture_dump(small_net, small_input, tmp_path / "d", module_patterns=["blocks.*.fc", "head"])
    assert summary.hooked_modules == ("blocks.0.fc", "blocks.1.fc", "head")
    assert [r.module for r in open_dump(tmp_path / "d").records] == ["blocks.0.fc", "blocks.1.fc", "head"]


def test_patterns_matching_nothing_name_the_modules(small_net, small_input, tmp_path):
    with pytest.raises(WorkbenchError, match=r"matches no module of SmallNet; names look like: <root>, embed"):
        capture_dump(small_net, small_input, tmp_path / "d", module_patterns=["decoder.*"])
    assert not (tmp_path / "d").exists()


class TwoOutputs(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        return x * 2, {"half": x / 2, "label": "not a tensor"}


class SharedTwice(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pair = TwoOutputs()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, _ = self.pair(x)
        b, rest = self.pair(a)
        return b + rest["half"]


def test_tuple_outputs_and_repeated_calls_get_distinct_keys(tmp_path):
    capture_dump(SharedTwice(), torch.ones(2, 2), tmp_path / "d", module_patterns=["pair"])
    dump = open_dump(tmp_path / "d")
    assert [r.key for r in dump.records] == [
        "pair.output.0",
        "pair.output.1",
        "pair.call1.output.0",
        "pair.call1.output.1",
    ]
    torch.testing.assert_close(dump.load(dump.records[3]), torch.ones(2, 2))  # (1 * 2) / 2


def test_capture_refuses_a_non_empty_directory_and_leaves_it_alone(small_net, small_input, tmp_path):
    target = tmp_path / "d"
    target.mkdir()
    (target / "keep.txt").write_text("precious")
    with pytest.raises(WorkbenchError, match="already exists and is not empty"):
        capture_dump(small_net, small_input, target)
    assert [p.name for p in target.iterdir()] == ["keep.txt"] and (target / "keep.txt").read_text() == "precious"


class Explodes(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.first(x)
        raise RuntimeError("kernel failed")


def test_a_failed_forward_keeps_what_was_written_and_marks_the_dump_incomplete(tmp_path):
    with pytest.raises(RuntimeError, match="kernel failed"):
        capture_dump(Explodes(), torch.ones(1, 4), tmp_path / "d")
    lines = (tmp_path / "d" / "records.jsonl").read_text().splitlines()
    assert [json.loads(line)["module"] for line in lines] == ["first"]
    assert (tmp_path / "d" / "tensors" / "000000.safetensors").is_file()
    with pytest.raises(WorkbenchError, match="incomplete: its capture did not finish"):
        open_dump(tmp_path / "d")


def test_inputs_with_nan_are_recorded(small_net, small_input, tmp_path):
    x = small_input.clone()
    x[0, 0, 0] = float("nan")
    capture_dump(small_net, x, tmp_path / "d")
    records = open_dump(tmp_path / "d").records
    assert all(r.inputs_nonfinite for r in records)  # NaN enters at the model input, so no module is its origin
    assert all(r.nonfinite for r in records)
