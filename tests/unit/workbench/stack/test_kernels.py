"""`workbench.stack.kernels`: which op runs a different kernel on two stacks, stack files, and the `kernels` verb."""

from __future__ import annotations

import json

import pytest
import yaml

from workbench.cli import main
from workbench.errors import WorkbenchError
from workbench.stack.kernels import KernelChange, context_of, kernel_diff, read_stack, selection_table

V0110 = {
    "python": "3.11.7",
    "versions": {"torch": "2.7.1", "torch-npu": "2.7.1.post1", "vllm": "0.11.0", "vllm-ascend": "0.11.0"},
    "cann": {"toolkit": "8.3.RC2", "kernels": "8.3.RC2", "nnal_atb": "8.3.RC2"},
    "chip": "910B4",
    "card_count": 8,
}
# v0.18.0's verified pair, vllm-ascend itself not recorded: the release comes from torch_npu + CANN.
V0180 = {
    "python": "3.11.7",
    "versions": {"torch": "2.9.0", "torch-npu": "2.9.0.post1+git4c901a4", "vllm": "0.18.0"},
    "cann": {"toolkit": "8.5.1"},
    "chip": "910B4",
}


def by_op(changes: list[KernelChange]) -> dict[str, tuple[str, str]]:
    return {c.op: (c.kernel_a, c.kernel_b) for c in changes}


def test_decode_moved_from_paged_attention_to_fia_between_v0_11_and_v0_18():
    changes = by_op(kernel_diff(V0110, V0180))
    assert changes["paged_decode_attention"] == ("_npu_paged_attention", "npu_fused_infer_attention_score")
    assert changes["prefill_attention"] == ("_npu_flash_attention", "npu_fused_infer_attention_score")
    assert "chunked_prefill_attention" not in changes  # FIA on both (attention_v1.py@v0.11.0 and @v0.13.0)
    assert "rms_norm" not in changes


def test_the_change_is_one_line_with_both_citations():
    decode = next(c for c in kernel_diff(V0110, V0180) if c.op == "paged_decode_attention")
    line = decode.describe()
    assert line.startswith("paged_decode_attention (DecodeOnly) moved from _npu_paged_attention (v0.11.0) to ")
    assert "attention_v1.py@v0.11.0" in line and "attention_v1.py@v0.13.0" in line
    assert decode.state == "DecodeOnly" and "decode.pa" in decode.row_a and "decode.fia" in decode.row_b


def test_full_decode_only_with_pa_shape_list_keeps_decode_on_paged_attention():
    changes = by_op(kernel_diff(V0110, V0180, graph_mode="FULL_DECODE_ONLY", pa_shape=True))
    assert "paged_decode_attention" not in changes and "prefill_attention" in changes


def test_same_stack_no_change_and_unknown_stack_says_native():
    assert kernel_diff(V0110, V0110) == []
    unknown = by_op(kernel_diff(V0110, {"versions": {"torch": "2.13.0"}}))
    assert unknown["paged_decode_attention"] == ("_npu_paged_attention", "native")


def test_chip_matters_a5_writes_the_cache_with_scatter():
    a5 = {**V0180, "chip": "Ascend950PR"}
    assert by_op(kernel_diff(V0180, a5))["reshape_and_cache"] == ("_npu_reshape_and_cache", "npu_scatter_pa_kv_cache")


def test_selection_table_of_a_stack_cites_every_row():
    table = selection_table(V0180).set_index("op")
    assert table.loc["paged_decode_attention", "kernel"] == "npu_fused_infer_attention_score"
    assert table.loc["paged_decode_attention", "row"] == "decode.fia"
    assert table.loc["paged_decode_attention", "source"].startswith("vllm_ascend/attention/attention_v1.py@v0.13.0")
    assert table.loc["gelu", "kernel"] == "native" and table.loc["gelu", "reason"]


def test_bad_graph_mode_is_one_clear_error():
    with pytest.raises(WorkbenchError, match="graph mode 'SOMETIMES'"):
        kernel_diff(V0110, V0180, graph_mode="SOMETIMES")


@pytest.mark.parametrize(
    "wrap",
    [lambda s: {"kind": "lock", "stack": s}, lambda s: {"provenance": {"stack": s}, "metrics": {}}, lambda s: s],
    ids=["lock", "result", "bare"],
)
def test_read_stack_accepts_lock_result_and_bare_files(tmp_path, wrap):
    path = tmp_path / "stack.yaml"
    path.write_text("# a comment line, as lock files start\n" + yaml.safe_dump(wrap(V0110)))
    assert read_stack(path) == V0110
    json_path = tmp_path / "stack.json"
    json_path.write_text(json.dumps(wrap(V0180)))
    assert read_stack(json_path) == V0180


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "not found"),
        ("a: [1, 2", "not valid"),
        ("- 1\n- 2\n", "expected a mapping"),
        ("x: 1\n", "no stack found"),
    ],
)
def test_read_stack_errors_name_the_file_and_the_fix(tmp_path, text, message):
    path = tmp_path / "stack.yaml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(WorkbenchError, match=message) as info:
        read_stack(path)
    assert str(path) in str(info.value)


def test_kernels_verb_diff_prints_the_change_and_exits_1(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.yaml"
    a.write_text(json.dumps({"stack": V0110}))
    b.write_text(yaml.safe_dump({"stack": V0180}))
    out_json = tmp_path / "changes.json"
    assert main(["kernels", "--diff", str(a), str(b), "--json", str(out_json)]) == 1
    printed = capsys.readouterr().out
    assert "paged_decode_attention (DecodeOnly) moved from _npu_paged_attention (v0.11.0)" in printed
    written = json.loads(out_json.read_text())
    assert "provenance" in written and any(r["op"] == "paged_decode_attention" for r in written["rows"])
    assert main(["kernels", "--diff", str(a), str(a)]) == 0


def test_kernels_verb_shows_a_stack_and_reports_a_missing_file(tmp_path, capsys):
    b = tmp_path / "b.json"
    b.write_text(json.dumps(V0180))
    assert main(["kernels", "--stack", str(b)]) == 0
    printed = capsys.readouterr().out
    assert "v0.18.0" in printed and "decode.fia" in printed
    assert main(["kernels", "--stack", str(tmp_path / "missing.yaml")]) == 2
    assert "stack file not found" in capsys.readouterr().err


def test_kernels_verb_on_this_machine_follows_the_override(monkeypatch, capsys):
    monkeypatch.setenv("ASCEND_BACKEND_KERNELS", "release=0.11.0,chip=A3")
    assert main(["kernels"]) == 0
    printed = capsys.readouterr().out
    assert "ASCEND_BACKEND_KERNELS release=0.11.0" in printed and "_npu_paged_attention" in printed


def test_diff_two_releases_two_chips_two_graph_modes_by_spec(capsys):
    # releases: attention_v1.py@v0.11.0 vs @v0.13.0rc1; chips: device_op.py@v0.20.2rc1 (A5's Norm cache write);
    # graph modes: attention/utils.py@v0.13.0 using_paged_attention with pa_shape_list.
    assert main(["kernels", "--diff", "0.11.0", "0.18.0", "--chip", "A3"]) == 1
    out = capsys.readouterr().out
    assert "paged_decode_attention (DecodeOnly) moved from _npu_paged_attention (v0.11.0)" in out
    assert main(["kernels", "--diff", "A2", "A5", "--release", "0.20.2rc1"]) == 1
    out = capsys.readouterr().out
    assert "reshape_and_cache (cache write) moved from _npu_reshape_and_cache" in out
    assert main(["kernels", "--diff", "NONE", "FULL_DECODE_ONLY", "--release", "0.18.0", "--pa-shape"]) == 1
    out = capsys.readouterr().out
    assert "moved from npu_fused_infer_attention_score (v0.18.0) to _npu_paged_attention (v0.18.0)" in out
    assert main(["kernels", "--diff", "release=0.18.0,chip=A2", "release=0.18.0,chip=A2"]) == 0


def test_diff_reports_a_changed_recipe_as_changed_arguments():
    from workbench.stack.kernels import kernel_diff_contexts, side_context

    base = context_of(V0180)
    changes = {
        c.op: c for c in kernel_diff_contexts(side_context("0.20.2rc1,A5", base), side_context("0.19.1rc1,A5", base))
    }
    write = changes["reshape_and_cache"]
    assert write.what == "arguments" and (write.recipe_a, write.recipe_b) == (
        "scatter_pa_kv_cache_norm",
        "scatter_pa_kv_cache",
    )
    dynamic = {c.op: c for c in kernel_diff_contexts(side_context("0.21.0rc1", base), side_context("0.22.1rc1", base))}
    assert dynamic["w8a8_dynamic_linear"].recipe_b == "dynamic_quant_int8"


def test_a_bad_side_spec_is_one_clear_error():
    from workbench.stack.kernels import side_context

    with pytest.raises(WorkbenchError, match="neither a file, a release"):
        side_context("sometimes", context_of(V0180))
    with pytest.raises(WorkbenchError, match="unknown key 'color'"):
        side_context("color=red", context_of(V0180))


def test_the_table_names_vllm_ascends_own_default_and_deliberate_differences():
    table = selection_table(V0180).set_index("op")
    assert "rope_forward_triton" in table.loc["rotary_embedding", "vllm_default"]
    assert "npu_gemma_rms_norm" in table.loc["gemma_rms_norm", "vllm_default"]
    assert table.loc["gemma_rms_norm", "differs"]
    assert table.loc["w8a16_linear", "reason"].startswith("refused:")


def test_an_ambiguous_release_is_shown_with_its_candidates(capsys):
    stack = {"versions": {"torch-npu": "2.10.0.post2"}, "cann": {"toolkit": "9.0.1"}, "chip": "910B4"}
    table = selection_table(stack).set_index("op")
    assert table.loc["reshape_and_cache", "kernel"] == "native"
    assert "ambiguous release" in table.loc["reshape_and_cache", "reason"]
    assert table.loc["rms_norm", "kernel"] == "npu_rms_norm"
