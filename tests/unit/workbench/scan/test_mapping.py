"""The mapping table (policy/scan/cuda-mapping.yaml) against the scanner and the rest of the workbench:
every rule has a row and every row a rule, every row cites a pinned source, every verify step names an
op, feature or check group that exists, every method section exists in docs/METHOD.md."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.conftest import REPO_ROOT
from workbench.errors import WorkbenchError
from workbench.scan.findings import Severity
from workbench.scan.mapping import VerifyStep, default_mapping_path, load_mapping
from workbench.scan.rule_ids import Rule

MAPPING = load_mapping()


def test_every_rule_has_a_row_and_every_row_a_rule():
    assert set(MAPPING.rules) == {r.value for r in Rule}


def test_every_row_cites_a_source_pinned_to_the_referenced_tags():
    tags = {
        "https://github.com/Ascend/pytorch/blob/": MAPPING.references["torch_npu"],
        "https://github.com/vllm-project/vllm-ascend/blob/": MAPPING.references["vllm_ascend"],
    }
    for rule, row in MAPPING.rules.items():
        assert row.cite, rule
        for url in row.cite:
            for prefix, tag in tags.items():
                if url.startswith(prefix):
                    assert url.startswith(prefix + tag + "/"), f"{rule}: {url} is not at {tag}"
    assert MAPPING.torch_npu_names.cite.startswith(
        f"https://github.com/Ascend/pytorch/blob/{MAPPING.references['torch_npu']}/"
    )


def test_verify_steps_name_things_the_workbench_has():
    from workbench.accuracy.opsuite import load_cases
    from workbench.bisect.plan import features_dir, load_plan
    from workbench.check.result import Group

    ops = {case.op for case in load_cases()}
    features = {f.name for f in load_plan(features_dir() / "ascend.yaml").features}
    groups = {g.value for g in Group}
    known = {VerifyStep.COMPARE_OPS: ops, VerifyStep.BISECT: features, VerifyStep.CHECK: groups}
    for rule, row in MAPPING.rules.items():
        target = row.verify.target
        if row.verify.step in known and target is not None:
            assert target in known[row.verify.step], f"{rule}: {row.verify.step.value} has no {target!r}"
        elif row.verify.step is VerifyStep.BISECT:
            pytest.fail(f"{rule}: a bisect step names the feature to enable")


def test_method_sections_exist():
    sections = {int(n) for n in re.findall(r"^## (\d+)\.", (REPO_ROOT / "docs" / "METHOD.md").read_text(), re.M)}
    for rule, row in MAPPING.rules.items():
        assert set(row.method) <= sections, f"{rule}: {row.method} not all in docs/METHOD.md"


def test_rows_without_a_counterpart_are_not_marked_as_working():
    for rule, row in MAPPING.rules.items():
        if row.counterpart.lower().startswith("none"):
            assert row.severity in (Severity.CHANGE, Severity.BLOCKS), rule
    assert {row.severity for r, row in MAPPING.rules.items() if r.startswith("unresolved.")} == {Severity.UNKNOWN}


def test_torch_npu_names_cover_what_transfer_to_npu_wraps():
    # transfer_to_npu's torch_cuda_fn_white_list (same tag): each of these must be a torch.npu name
    wrapped = {"get_device_properties", "get_device_name", "get_device_capability", "set_device", "synchronize",
               "mem_get_info", "memory_stats", "memory_summary", "memory_allocated", "max_memory_allocated",
               "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats", "default_stream",
               "can_device_access_peer", "current_stream", "utilization", "set_per_process_memory_fraction",
               "caching_allocator_alloc"}  # fmt: skip
    assert wrapped <= MAPPING.npu_names


def _write(tmp_path, edit) -> str:
    data = yaml.safe_load(default_mapping_path().read_text())
    edit(data)
    path = tmp_path / "mapping.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_a_row_for_an_unknown_rule_fails_with_a_hint(tmp_path):
    path = _write(tmp_path, lambda d: d["rules"].__setitem__("lib.flash_atn", d["rules"]["lib.flash_attn"]))
    with pytest.raises(WorkbenchError, match=r"mapping.yaml: rules: .*'lib.flash_atn'.*did you mean 'lib.flash_attn'"):
        load_mapping(path)


def test_a_missing_row_fails_naming_the_rule(tmp_path):
    path = _write(tmp_path, lambda d: d["rules"].pop("tool.nvidia_smi"))
    with pytest.raises(WorkbenchError, match=r"rules without a row: tool.nvidia_smi"):
        load_mapping(path)


def test_an_unpinned_citation_fails(tmp_path):
    url = "https://github.com/vllm-project/vllm-ascend/blob/main/docs/source/faqs.md"
    path = _write(tmp_path, lambda d: d["rules"]["tool.nvidia_smi"].__setitem__("cite", [url]))
    with pytest.raises(WorkbenchError, match=r"rules.tool.nvidia_smi.cite: .*tag or commit"):
        load_mapping(path)


def test_a_row_without_citation_or_with_a_typo_fails(tmp_path):
    path = _write(tmp_path, lambda d: d["rules"]["tool.nvidia_smi"].__setitem__("cite", []))
    with pytest.raises(WorkbenchError, match=r"rules.tool.nvidia_smi.cite"):
        load_mapping(path)
    path = _write(tmp_path, lambda d: d["rules"]["tool.nvidia_smi"].__setitem__("severty", "works"))
    with pytest.raises(WorkbenchError, match=r"severty: unknown key; did you mean 'severity'"):
        load_mapping(path)


def test_a_missing_mapping_file_is_one_clear_error(tmp_path):
    with pytest.raises(WorkbenchError, match=r"scan mapping .*nope.yaml not found"):
        load_mapping(tmp_path / "nope.yaml")


def test_a_graph_option_value_carries_what_vllm_ascend_does_to_it(tmp_path):
    """cudagraph_mode FULL_AND_PIECEWISE in a serving script: the finding names the releases whose
    platform rewrites it (from the config-truth table), and none is added for a value no rule touches."""
    from workbench.scan.api import scan_path

    script = tmp_path / "serve.sh"
    script.write_text('vllm serve m --compilation-config \'{"cudagraph_mode": "FULL_AND_PIECEWISE"}\'\n')
    (finding,) = [f for f in scan_path(script).findings if f.rule == "vllm.cudagraph_option"]
    assert "rewrites it to PIECEWISE" in finding.counterpart and "v0.11.0rc0" in finding.counterpart
    script.write_text('vllm serve m --compilation-config \'{"cudagraph_mode": "FULL_DECODE_ONLY"}\'\n')
    (finding,) = [f for f in scan_path(script).findings if f.rule == "vllm.cudagraph_option"]
    assert "rewrites" not in finding.counterpart
