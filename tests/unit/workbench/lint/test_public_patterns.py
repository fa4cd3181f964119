"""The general patterns the public record showed lint missing (issue 47), each on the release and thread it
was seen at: a setting read through a pattern of vllm-ascend's code, a capability per release from the
table scan, lint, `lint --checkpoint` and triage share, and variables that are not vLLM's."""

from __future__ import annotations

import pytest

from workbench.lint.api import lint_parsed
from workbench.lint.command import parse_text


def _finding(text: str, release: str, setting: str, model_type: str | None = None):
    report = lint_parsed(parse_text(text, "test"), release=release, model_type=model_type)
    found = [f for f in report.findings if f.setting == setting]
    assert found, [f.setting for f in report.findings]
    return found[0]


@pytest.mark.parametrize(
    ("release", "method", "kind"),
    [
        ("v0.11.0", "compressed-tensors", "rejected"),  # supported_quantization = [ascend] (v0.11.0 platform.py)
        ("v0.13.0", "compressed-tensors", "ok"),
        ("v0.13.0", "awq", "rejected"),  # vllm-ascend#6800: the server refuses it at start-up
        ("v0.18.0", "fp8", "rejected"),  # not in supported_quantization before v0.21.0rc1
        ("v0.23.0", "ascend", "ok"),
    ],
)
def test_a_quantization_method_is_judged_per_release_from_the_platform_list(release, method, kind):
    finding = _finding(f"vllm serve Qwen/Qwen3-8B --quantization {method}", release, "flag.--quantization")
    assert finding.finding.value == kind, finding.reason


def test_fp8_is_served_for_one_model_family_only():
    """vllm-ascend#14466: the 'fp8' method builds DeepSeek-V4's schemes; other FP8 checkpoints are refused."""
    other = _finding("vllm serve Qwen/Qwen3-8B --quantization fp8", "v0.23.0", "flag.--quantization")
    assert other.finding.value == "rejected" and "DeepSeek-V4" in other.reason
    ours = _finding("vllm serve deepseek-ai/DeepSeek-V4 --quantization fp8", "v0.23.0", "flag.--quantization")
    assert ours.severity.value == "pass"


def test_the_scan_blocks_what_lint_refuses():
    from workbench.scan.catalog import is_unsupported_quantization

    assert is_unsupported_quantization("awq") and is_unsupported_quantization("gptq")
    assert not is_unsupported_quantization("ascend") and not is_unsupported_quantization("compressed-tensors")


def test_a_vl_model_with_flashcomm_is_refused_and_the_model_type_flag_says_which_model():
    """vllm-ascend#6950 / PR #4272: Flash Comm V1 is not supported for VL models."""
    env = "VLLM_ASCEND_ENABLE_FLASHCOMM1=1 vllm serve {model}"
    vl = _finding(env.format(model="Qwen/Qwen2.5-VL-7B-Instruct"), "v0.14.0rc1", "env.VLLM_ASCEND_ENABLE_FLASHCOMM1")
    assert vl.finding.value == "rejected"
    text = env.format(model="/models/served")
    assert _finding(text, "v0.14.0rc1", "env.VLLM_ASCEND_ENABLE_FLASHCOMM1").severity.value == "pass"
    typed = _finding(text, "v0.14.0rc1", "env.VLLM_ASCEND_ENABLE_FLASHCOMM1", model_type="qwen2_5_vl")
    assert typed.finding.value == "rejected"


def test_an_old_name_read_through_os_getenv_outside_envs_py_is_an_alias():
    finding = _finding("VLLM_ASCEND_ENABLE_FLASHCOMM=1 vllm serve m", "v0.13.0", "env.VLLM_ASCEND_ENABLE_FLASHCOMM")
    assert finding.finding.value == "deprecated" and finding.migrate == ("env.VLLM_ASCEND_ENABLE_FLASHCOMM1", "1")


def test_a_section_copied_key_by_key_knows_the_fields_its_dataclass_picks():
    """v0.11.0's ascend_scheduler_config: a setattr loop, then AscendSchedulerConfig picks its fields."""
    config = '{"ascend_scheduler_config": {"enabled": true, "enable_chunked_prefill": true, "foo_bar": 1}}'
    text = f"vllm serve m --additional-config '{config}'"
    chunked = _finding(text, "v0.11.0", "additional_config.ascend_scheduler_config.enable_chunked_prefill")
    assert chunked.finding.value == "ok"
    other = _finding(text, "v0.11.0", "additional_config.ascend_scheduler_config.foo_bar")
    assert other.severity.value == "warning" and "copies every key" in other.reason


def test_a_name_that_cannot_be_an_environment_variable_is_an_error_with_its_spelling():
    finding = _finding("export VLLM-USE-V1=1\nvllm serve m", "v0.13.0", "env.VLLM-USE-V1")
    assert finding.finding.value == "rejected" and finding.fix == "VLLM_USE_V1=1"


def test_vllm_version_exported_by_hand_is_a_misuse_and_a_wrong_one_a_refusal():
    """vllm-ascend#10020, docs/source/faqs.md (InvalidVersion): VLLM_VERSION is for a vLLM built from source."""
    label = _finding("VLLM_VERSION=0.13.0 vllm serve m", "v0.13.0", "env.VLLM_VERSION")
    assert label.finding.value == "misuse" and label.severity.value == "warning"
    wrong = _finding("VLLM_VERSION=0.11.0 vllm serve m", "v0.13.0", "env.VLLM_VERSION")
    assert wrong.finding.value == "rejected"


def test_variables_that_are_not_vllms():
    text = (
        "export PROMETHEUS_MULTIPROC_DIR=/tmp/prom PYTORCH_ALLOC_CONF=expandable_segments:True\n"
        'export VLLM_EXTRA_ARGS="--max-num-seqs 8" VLLM_SERVICE_LABEL=blue\n'
        "vllm serve m $VLLM_EXTRA_ARGS"
    )
    prometheus = _finding(text, "v0.13.0", "env.PROMETHEUS_MULTIPROC_DIR")
    assert prometheus.severity.value == "pass" and "vllm/" in prometheus.cite
    twin = _finding(text, "v0.13.0", "env.PYTORCH_ALLOC_CONF")
    assert twin.severity.value == "warning" and twin.migrate == (
        "env.PYTORCH_NPU_ALLOC_CONF",
        "expandable_segments:True",
    )
    assert _finding(text, "v0.13.0", "env.VLLM_EXTRA_ARGS").severity.value == "pass"
    label = _finding(text, "v0.13.0", "env.VLLM_SERVICE_LABEL")
    assert label.severity.value == "warning" and "{name}" not in label.reason
