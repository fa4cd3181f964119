"""One finding per setting, judged against the checked-in config-truth table at a named release.

Each case is a fact read in vllm-ascend's source at the tags named (the cite the finding carries is
checked to point there), so a regenerated table that loses one fails here.
"""

from __future__ import annotations

import pytest

from workbench.lint.api import lint_parsed
from workbench.lint.command import parse_text
from workbench.results.verdict import Verdict


def finding(text: str, release: str, setting: str):
    report = lint_parsed(parse_text(text), release=release)
    found = [f for f in report.findings if f.setting == setting]
    assert found, f"no finding for {setting}: {[f.setting for f in report.findings]}"
    return found[-1]


def test_a_zero_one_variable_set_to_true_fails_start_up():
    f = finding("export VLLM_ASCEND_ENABLE_MLAPO=true\nvllm serve m", "v0.13.0", "env.VLLM_ASCEND_ENABLE_MLAPO")
    assert (f.finding.value, f.severity) == ("rejected", Verdict.ERROR)
    assert "int()" in f.reason and f.fix == "VLLM_ASCEND_ENABLE_MLAPO=1"
    assert f.cite.startswith("v0.") and "vllm_ascend/envs.py" in f.cite


@pytest.mark.parametrize(
    ("release", "expected"),
    [("v0.9.1", "ok"), ("v0.10.2rc1", "rejected"), ("v0.11.0", "rejected"), ("v0.13.0", "dead")],
)
def test_vllm_use_v1_zero_is_honoured_then_rejected_then_never_read(release, expected):
    f = finding("VLLM_USE_V1=0 vllm serve m", release, "env.VLLM_USE_V1")
    assert f.finding.value == expected, f.reason


def test_sections_dropped_at_v0_12_are_dead_with_the_commit_that_removed_them():
    text = 'vllm serve /models/DeepSeek-V3 --additional-config \'{"torchair_graph_config": {"enabled": true}, "ascend_scheduler_config": {"enabled": true}}\''
    assert finding(text, "v0.11.0", "additional_config.torchair_graph_config.enabled").finding.value == "ok"
    qwen = finding(
        text.replace("DeepSeek-V3", "Qwen3-32B"), "v0.10.0rc1", "additional_config.torchair_graph_config.enabled"
    )
    assert qwen.finding.value == "rejected" and "deepseek" in qwen.reason  # not in that tag's model list
    dead = finding(text, "v0.12.0rc1", "additional_config.torchair_graph_config")
    assert dead.finding.value == "dead" and "last read at v0.11.0" in dead.reason and "removed in" in dead.reason
    assert dead.value == {"enabled": True}
    assert finding(text, "main", "additional_config.ascend_scheduler_config").finding.value == "dead"


def test_eplb_root_keys_move_into_eplb_config():
    text = 'vllm serve m --additional-config \'{"expert_map_path": "/m.json", "init_redundancy_expert": 16}\''
    assert finding(text, "v0.13.0", "additional_config.expert_map_path").finding.value == "ok"
    renamed = finding(text, "main", "additional_config.init_redundancy_expert")
    assert renamed.finding.value == "renamed"
    assert renamed.migrate == ("additional_config.eplb_config.num_redundant_experts", 16)


def test_an_unknown_top_level_key_is_ignored_silently_and_a_close_name_is_offered():
    f = finding(
        "vllm serve m --additional-config '{\"enable_cpu_bindng\": true}'",
        "v0.13.0",
        "additional_config.enable_cpu_bindng",
    )
    assert f.finding.value == "unknown" and "without a word" in f.reason
    assert "additional_config.enable_cpu_binding" in f.reason


def test_a_section_that_rejects_unknown_keys_makes_them_rejected():
    text = 'vllm serve m --additional-config \'{"eplb_config": {"num_redundant_expert": 4}}\''
    f = finding(text, "main", "additional_config.eplb_config.num_redundant_expert")
    assert f.finding.value == "rejected" and "num_redundant_experts" in f.reason


def test_full_and_piecewise_is_rewritten_on_the_tags_that_do_it_only():
    text = 'vllm serve m --compilation-config \'{"cudagraph_mode": "FULL_AND_PIECEWISE"}\''
    rewritten = finding(text, "v0.13.0", "compilation_config.cudagraph_mode")
    assert rewritten.finding.value == "rewritten" and "'PIECEWISE'" in rewritten.reason
    assert finding(text, "v0.21.0rc1", "compilation_config.cudagraph_mode").finding.value == "ok"


def test_a_boolean_key_given_the_text_false_runs_as_true():
    f = finding(
        'vllm serve m --additional-config \'{"enable_cpu_binding": "false"}\'',
        "v0.13.0",
        "additional_config.enable_cpu_binding",
    )
    assert (f.finding.value, f.severity) == ("misuse", Verdict.ERROR) and f.migrate == (
        "additional_config.enable_cpu_binding",
        False,
    )


def test_a_build_time_variable_in_a_serving_command_is_misuse():
    f = finding("export SOC_VERSION=ascend910b1\nvllm serve m", "v0.13.0", "env.SOC_VERSION")
    assert f.finding.value == "misuse" and "setup.py" in f.reason


def test_an_environment_variable_moved_into_additional_config_is_deprecated_with_its_key():
    f = finding("export VLLM_ASCEND_ENABLE_NZ=2\nvllm serve m", "v0.22.1rc1", "env.VLLM_ASCEND_ENABLE_NZ")
    assert f.finding.value == "deprecated" and f.migrate == ("additional_config.weight_nz_mode", 2)


def test_a_setting_given_twice_is_reported_where_it_is_overridden():
    report = lint_parsed(
        parse_text("export HCCL_BUFFSIZE=200\nexport HCCL_BUFFSIZE=512\nvllm serve m"), release="v0.13.0"
    )
    kinds = [(f.line, f.finding.value) for f in report.findings if f.setting == "env.HCCL_BUFFSIZE"]
    assert kinds == [(1, "duplicate"), (2, "foreign")]


def test_a_missing_requirement_is_reported_on_the_missing_setting():
    text = 'vllm serve m --block-size 64 --additional-config \'{"xlite_graph_config": {"enabled": true}}\''
    for command in (text, text.replace("--block-size 64 ", "")):
        report = lint_parsed(parse_text(command), release="v0.13.0")
        missing = [f for f in report.findings if f.finding.value == "required_missing"]
        assert [(m.setting, m.migrate) for m in missing] == [("flag.--block-size", ("flag.--block-size", 128))]
    fixed = lint_parsed(parse_text(text.replace("64", "128")), release="v0.13.0")
    assert not [f for f in fixed.findings if f.finding.value == "required_missing"]


def test_cuda_settings_are_foreign_with_their_ascend_counterpart():
    f = finding("CUDA_VISIBLE_DEVICES=0 vllm serve m", "v0.13.0", "env.CUDA_VISIBLE_DEVICES")
    assert (f.finding.value, f.severity) == ("foreign", Verdict.WARNING) and "ASCEND_RT_VISIBLE_DEVICES" in f.fix


def test_flags_are_judged_against_the_vllm_the_release_pairs_with():
    f = finding("vllm serve m --tensor-paralel-size 2", "v0.13.0", "flag.--tensor-paralel-size")
    assert f.finding.value == "rejected" and "--tensor-parallel-size" in f.reason
    abbreviated = finding("vllm serve m --max-num-seq 4", "v0.13.0", "flag.--max-num-seq")
    assert abbreviated.finding.value == "misuse" and abbreviated.migrate == ("flag.--max-num-seqs", "4")
    assert finding("vllm serve m --max-num 4", "v0.13.0", "flag.--max-num").finding.value == "rejected"  # ambiguous
    short = finding("vllm serve m -tp 2", "v0.13.0", "flag.--tensor-parallel-size")
    assert short.finding.value == "ok"
    negative = finding("vllm serve m --no-enable-prefix-caching", "v0.13.0", "flag.--enable-prefix-caching")
    assert negative.value == "false"


def test_names_of_cann_hccl_and_torch_npu_are_foreign_not_unknown():
    text = "export HCCL_OP_EXPANSION_MODE=AIV PYTORCH_NPU_ALLOC_CONF=expandable_segments:True OMP_NUM_THREADS=1\nvllm serve m"
    report = lint_parsed(parse_text(text), release="v0.13.0")
    assert {f.setting: f.finding.value for f in report.findings} == {
        "env.HCCL_OP_EXPANSION_MODE": "foreign",
        "env.PYTORCH_NPU_ALLOC_CONF": "foreign",
        "env.OMP_NUM_THREADS": "foreign",
    }


def test_an_unknown_vllm_ascend_variable_offers_the_real_name():
    f = finding("export VLLM_ASCEND_ENABLE_MLAP=1\nvllm serve m", "v0.13.0", "env.VLLM_ASCEND_ENABLE_MLAP")
    assert f.finding.value == "unknown" and "VLLM_ASCEND_ENABLE_MLAPO" in f.reason


def test_a_value_outside_the_values_start_up_accepts_is_rejected():
    text = 'vllm serve m --additional-config \'{"eplb_config": {"eplb_policy_type": 5, "eplb_heat_collection_stage": "decode"}}\''
    bad = finding(text, "main", "additional_config.eplb_config.eplb_policy_type")
    assert bad.finding.value == "rejected" and "[0, 1, 2, 3]" in bad.reason
    assert finding(text, "main", "additional_config.eplb_config.eplb_heat_collection_stage").finding.value == "ok"


def test_a_compilation_config_key_an_older_vllm_had_is_dead_citing_the_last_vllm_that_had_it():
    """vLLM 0.11.0's CompilationConfig still had use_inductor; the vLLM v0.13.0 runs on refuses the field."""
    text = "vllm serve m --compilation-config '{\"use_inductor\": true}'"
    f = finding(text, "v0.13.0", "compilation_config.use_inductor")
    assert (f.finding.value, f.severity) == ("dead", Verdict.ERROR)
    assert "last in vLLM 0.11.0" in f.reason and f.cite == "pypi:vllm-0.11.0.tar.gz" and f.migrate == ("", None)
