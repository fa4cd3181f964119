"""compare_dumps: first divergence and NaN origin on deliberately corrupted modules; mismatched, corrupt
and truncated dumps fail with one clear message and change nothing; msprobe dumps on either side."""

from __future__ import annotations

import csv
import json
import math

import pytest
import torch

from tests.conftest import FIXTURES
from tests.unit.workbench.accuracy.conftest import EXECUTION_ORDER, tree_digest
from workbench.accuracy.dump import capture_dump, open_dump
from workbench.accuracy.dump_compare import compare_dumps
from workbench.accuracy.msprobe_dump import MsprobeDump, parse_entry_name
from workbench.errors import WorkbenchError

MSPROBE = FIXTURES / "msprobe"


def _corrupt(module: torch.nn.Module, how):
    """Register a forward hook that rewrites the module's output (registered before capture's hooks)."""

    def hook(_module, _args, output):
        output = output.clone()
        how(output)
        return output

    return module.register_forward_hook(hook)


@pytest.fixture
def reference_dump(small_net, small_input, tmp_path):
    capture_dump(small_net, small_input, tmp_path / "ref", prompt_token_ids=[1, 2, 3])
    return tmp_path / "ref"


def test_scaled_layer_is_the_first_divergence(small_net, small_input, tmp_path, reference_dump):
    handle = _corrupt(small_net.blocks[0].fc, lambda out: out.mul_(1.01))
    capture_dump(small_net, small_input, tmp_path / "test", prompt_token_ids=[1, 2, 3])
    handle.remove()
    result = compare_dumps(tmp_path / "test", reference_dump)
    verdicts = dict(zip(result.table["module"], result.table["verdict"], strict=True))
    assert verdicts["embed"] == verdicts["blocks.0.norm"] == "pass"
    assert verdicts["blocks.0.fc"] == "error"
    assert result.summary.first_divergence == "blocks.0.fc.output.0"
    assert "single rule" in result.summary.first_divergence_reason
    row = result.table.set_index("module").loc["blocks.0.fc"]
    assert row["max_rel_err"] == pytest.approx(0.01, rel=1e-4) and row["one_thousandth_ratio"] == 0.0
    assert result.summary.nan_origin is None


def test_nan_origin_is_the_module_whose_inputs_were_finite(small_net, small_input, tmp_path, reference_dump):
    handle = _corrupt(small_net.blocks[1].fc, lambda out: out.__setitem__((0, 2, 3), math.nan))
    capture_dump(small_net, small_input, tmp_path / "test", prompt_token_ids=[1, 2, 3])
    handle.remove()
    dump = open_dump(tmp_path / "test")
    flags = {r.module: (r.nonfinite, r.inputs_nonfinite) for r in dump.records}
    assert flags["blocks.1.norm"] == (False, False)
    assert flags["blocks.1.fc"] == (True, False)
    assert flags["blocks.1"] == (True, False)  # the block's own input was fine too, but it completes later
    assert flags["head"] == (True, True)
    result = compare_dumps(tmp_path / "test", reference_dump)
    s = result.summary
    assert s.nan_origin == s.first_nonfinite == "blocks.1.fc.output.0"
    assert s.first_divergence == "blocks.1.fc.output.0" and "NaN/Inf positions differ" in s.first_divergence_reason
    row = result.table.set_index("module").loc["blocks.1.fc"]
    assert row["test_nan_count"] == 1 and row["reference_nan_count"] == 0
    assert s.reference_nan_origin is None


def test_json_export_has_provenance_summary_and_rows(small_net, small_input, tmp_path, reference_dump):
    result = compare_dumps(reference_dump, reference_dump)
    path = result.write(tmp_path / "report" / "cmp.json", {"created_at": "now"})
    payload = json.loads(path.read_text())
    assert payload["provenance"] == {"created_at": "now"}
    assert payload["summary"]["compared"] == len(EXECUTION_ORDER)
    assert [row["module"] for row in payload["rows"]] == EXECUTION_ORDER
    with pytest.raises(WorkbenchError, match="lies inside the dump"):
        result.write(reference_dump / "cmp.json", {})


def test_different_prompts_are_refused(small_net, small_input, tmp_path, reference_dump):
    capture_dump(small_net, small_input, tmp_path / "other", prompt_token_ids=[1, 2, 4])
    with pytest.raises(WorkbenchError, match="different prompts .* first difference at token 2"):
        compare_dumps(tmp_path / "other", reference_dump)


def test_different_shapes_are_refused(small_net, small_input, tmp_path, reference_dump):
    capture_dump(small_net, small_input[:2], tmp_path / "short", prompt_token_ids=[1, 2, 3])
    with pytest.raises(WorkbenchError, match=r"differ in shape .*embed.output.0: \[2, 5, 16\] vs \[3, 5, 16\]"):
        compare_dumps(tmp_path / "short", reference_dump)


def test_size_one_dimensions_are_squeezed_like_msprobe(small_net, small_input, tmp_path, reference_dump):
    capture_dump(small_net, small_input[:1], tmp_path / "batched", prompt_token_ids=[1, 2, 3])
    capture_dump(small_net, small_input[0], tmp_path / "flat", prompt_token_ids=[1, 2, 3])
    result = compare_dumps(tmp_path / "flat", tmp_path / "batched")
    assert result.table["shape"].iloc[0] == "[5, 16]" and set(result.table["verdict"]) == {"pass"}
    assert (result.table["max_abs_err"] < 1e-6).all()


def test_missing_modules_are_refused_unless_allowed(small_net, small_input, tmp_path, reference_dump):
    capture_dump(small_net, small_input, tmp_path / "part", module_patterns=["blocks.*"], prompt_token_ids=[1, 2, 3])
    with pytest.raises(WorkbenchError, match="only in reference: embed.output.0.*--allow-missing"):
        compare_dumps(tmp_path / "part", reference_dump)
    result = compare_dumps(tmp_path / "part", reference_dump, allow_missing=True)
    assert result.summary.compared == 6
    assert result.summary.only_in_reference == ("embed.output.0", "head.output.0", "<root>.output.0")


def _assert_refused_and_untouched(test_dir, ref_dir, match):
    before = (tree_digest(test_dir), tree_digest(ref_dir))
    with pytest.raises(WorkbenchError, match=match):
        compare_dumps(test_dir, ref_dir)
    assert (tree_digest(test_dir), tree_digest(ref_dir)) == before


def test_truncated_records_are_refused(small_net, small_input, tmp_path, reference_dump):
    capture_dump(small_net, small_input, tmp_path / "cut", prompt_token_ids=[1, 2, 3])
    records = tmp_path / "cut" / "records.jsonl"
    records.write_text("".join(records.read_text().splitlines(keepends=True)[:-2]))
    _assert_refused_and_untouched(
        tmp_path / "cut", reference_dump, "holds 7 records but manifest.json says 9: the dump is truncated"
    )


def test_corrupt_record_line_is_refused(small_net, small_input, tmp_path, reference_dump):
    capture_dump(small_net, small_input, tmp_path / "bad", prompt_token_ids=[1, 2, 3])
    records = tmp_path / "bad" / "records.jsonl"
    lines = records.read_text().splitlines(keepends=True)
    records.write_text("".join(lines[:3] + ['{"index": 3, "modu\n'] + lines[4:]))
    _assert_refused_and_untouched(tmp_path / "bad", reference_dump, "records.jsonl line 4 is corrupt")


def test_corrupt_manifest_is_refused(small_net, small_input, tmp_path, reference_dump):
    capture_dump(small_net, small_input, tmp_path / "bad", prompt_token_ids=[1, 2, 3])
    (tmp_path / "bad" / "manifest.json").write_text('{"format": ')
    _assert_refused_and_untouched(tmp_path / "bad", reference_dump, "manifest.json is not valid JSON")


def test_corrupt_tensor_file_is_refused(small_net, small_input, tmp_path, reference_dump):
    capture_dump(small_net, small_input, tmp_path / "bad", prompt_token_ids=[1, 2, 3])
    (tmp_path / "bad" / "tensors" / "000004.safetensors").write_bytes(b"\x00garbage")
    _assert_refused_and_untouched(
        tmp_path / "bad", reference_dump, r"000004.safetensors for blocks.1.norm.output.0 is corrupt"
    )


def test_missing_tensor_file_is_refused(small_net, small_input, tmp_path, reference_dump):
    capture_dump(small_net, small_input, tmp_path / "bad", prompt_token_ids=[1, 2, 3])
    (tmp_path / "bad" / "tensors" / "000002.safetensors").unlink()
    _assert_refused_and_untouched(
        tmp_path / "bad", reference_dump, "000002.safetensors for blocks.0.fc.output.0 is missing"
    )


def test_not_a_dump_and_no_directory(tmp_path, reference_dump):
    (tmp_path / "empty").mkdir()
    with pytest.raises(WorkbenchError, match="is not a dump: it has no manifest.json"):
        compare_dumps(tmp_path / "empty", reference_dump)
    with pytest.raises(WorkbenchError, match="does not exist"):
        compare_dumps(tmp_path / "nope", reference_dump)


def test_entry_names_parse_like_msprobe_writes_them():
    assert parse_entry_name("Functional.linear.1.forward") == ("Functional.linear", 1)
    assert parse_entry_name("Module.model.layers.0.mlp.LlamaMLP.forward.0") == ("model.layers.0.mlp", 0)
    assert parse_entry_name("Functional.linear.1.backward") is None
    assert parse_entry_name("Module.fc.Linear.backward.0") is None


def test_msprobe_dumps_compare_like_msprobe(tmp_path):
    result = compare_dumps(MSPROBE / "dump_bf16", MSPROBE / "dump_fp32")
    assert list(result.table["key"]) == [
        "Functional.linear.output.0",
        "Functional.gelu.output.0",
        "Functional.linear.call1.output.0",
    ]
    with open(MSPROBE / "compare_result_fp32_vs_bf16_tensor.csv", newline="") as f:
        csv_rows = {row["NPU Name"]: row for row in csv.DictReader(f)}
    names = [
        "Functional.linear.0.forward.output.0",
        "Functional.gelu.0.forward.output.0",
        "Functional.linear.1.forward.output.0",
    ]
    for (_, row), name in zip(result.table.iterrows(), names, strict=True):
        expected = csv_rows[name]
        assert row["max_abs_err"] == pytest.approx(float(expected["MaxAbsErr"]), abs=1e-11)
        assert row["max_rel_err"] == pytest.approx(float(expected["MaxRelativeErr"]), rel=1e-11)
        assert row["one_thousandth_ratio"] == float(expected["One Thousandth Err Ratio"])
        assert row["test_norm"] == float(expected["NPU l2norm"]) and row["reference_norm"] == float(
            expected["Bench l2norm"]
        )
    assert result.summary.first_divergence == "Functional.linear.output.0"


def test_msprobe_statistics_dump_compares_on_stats():
    dump = open_dump(MSPROBE / "stat_fp32")
    assert isinstance(dump, MsprobeDump) and all(r.file is None for r in dump.records)
    result = compare_dumps(MSPROBE / "dump_bf16", MSPROBE / "stat_fp32")
    assert result.summary.mode == "stats" and result.summary.compared == 3
    first = result.table.iloc[0]
    assert first["norm_rel_diff"] == pytest.approx(abs(7.375 - 7.394946575164795) / 7.394946575164795)


def test_msprobe_parent_with_several_dumps_asks_for_one(tmp_path):
    for proc in ("proc1", "proc2"):
        (tmp_path / "step0" / proc).mkdir(parents=True)
        (tmp_path / "step0" / proc / "dump.json").write_text(json.dumps({"task": "statistics", "data": {}}))
    with pytest.raises(WorkbenchError, match="holds 2 msprobe dumps .*pass the step/proc"):
        open_dump(tmp_path)


def test_workbench_dump_against_a_live_msprobe_capture(small_input, tmp_path, monkeypatch):
    pytest.importorskip("msprobe")
    from msprobe.pytorch import PrecisionDebugger

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    monkeypatch.chdir(tmp_path)
    debugger = PrecisionDebugger(task="tensor", level="L0", dump_path=str(tmp_path / "msprobe"))
    debugger.start(net)
    with torch.no_grad():
        net(small_input)
    debugger.stop()
    debugger.step()
    capture_dump(net, small_input, tmp_path / "ours", module_patterns=["[0-9]"])
    result = compare_dumps(tmp_path / "ours", tmp_path / "msprobe")
    assert list(result.table["module"]) == ["0", "1", "2", "3"]
    assert set(result.table["verdict"]) == {"pass"} and (result.table["max_abs_err"] == 0).all()


def test_msprobe_nan_origin_is_read_from_input_and_output_statistics(tmp_path):
    raw = json.loads((MSPROBE / "stat_fp32" / "step0" / "proc12977" / "dump.json").read_text())
    raw["data"]["Functional.gelu.0.forward"]["output"][0]["Max"] = "nan"  # gelu made the NaN ...
    raw["data"]["Functional.linear.1.forward"]["input_args"][0]["Max"] = "nan"  # ... linear.1 received it
    raw["data"]["Functional.linear.1.forward"]["output"][0]["Min"] = "-inf"
    (tmp_path / "dump.json").write_text(json.dumps(raw))
    dump = open_dump(tmp_path)
    flags = [(r.key, r.nonfinite, r.inputs_nonfinite) for r in dump.records]
    assert flags == [
        ("Functional.linear.output.0", False, False),
        ("Functional.gelu.output.0", True, False),
        ("Functional.linear.call1.output.0", True, True),
    ]
    result = compare_dumps(tmp_path, MSPROBE / "stat_fp32")
    assert result.summary.nan_origin == "Functional.gelu.output.0"
    assert result.table.set_index("key").loc["Functional.gelu.output.0", "verdict"] == "error"
