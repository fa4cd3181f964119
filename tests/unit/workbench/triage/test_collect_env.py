"""collect_env outputs read back into the stack they describe (tests/fixtures/collect_env/SOURCES.md)."""

from __future__ import annotations

from tests.conftest import FIXTURES
from workbench.triage.collect_env import looks_like_collect_env, parse_collect_env
from workbench.triage.report import triage_paths

ENV = FIXTURES / "collect_env"


def _read(name: str):
    return parse_collect_env((ENV / name).read_text(encoding="utf-8"))


def test_newer_layout_310p3_gives_every_version_and_the_npu_table():
    env = _read("vllm_ascend_collect_env_310p3x8_issue2809.txt")
    assert (env.torch, env.torch_npu, env.vllm, env.vllm_ascend) == ("2.5.1", "2.5.1.post1", "0.9.1", "0.9.1")
    assert (env.cann_toolkit, env.cann_arch, env.driver) == ("8.2.RC1.alpha001", "aarch64", "24.1.0.1")
    assert (env.chips, env.card_count, env.python) == (("310P3",), 8, "3.10.18")
    assert env.env["ASCEND_GLOBAL_LOG_LEVEL"] == "1" and env.env["ASCEND_OPP_PATH"].endswith("/opp")
    assert env.npu_smi is not None and env.npu_smi.npu_ids[:3] == (0, 32, 96)


def test_older_layout_910b2_has_no_vllm_ascend_version_line():
    env = _read("vllm_ascend_collect_env_910b2x8_issue362.txt")
    assert env.vllm == "0.7.1" and env.vllm_ascend is None  # that release printed no such line
    assert (env.torch_npu, env.cann_toolkit, env.driver) == ("2.5.1.dev20250218", "8.0.0", "23.0.7")
    assert (env.chips, env.card_count, env.cpu_model) == (("910B2",), 8, "Kunpeng-920")
    assert env.env["ASCEND_TOOLKIT_HOME"] == "/usr/local/Ascend/ascend-toolkit/latest"


def test_a_cut_paste_and_upstream_vllms_layout_give_what_they_show_and_none_for_the_rest():
    head = _read("vllm_ascend_collect_env_head_torch2.10_openeuler_issue11624.txt")
    assert (head.torch, head.python, head.os) == ("2.10.0+cpu", "3.12.13", "openEuler 24.03 (LTS-SP3) (aarch64)")
    assert head.torch_npu is None and head.cann_toolkit is None and head.npu_smi is None
    assert head.npu_smi_problem == "no NPU section"
    upstream = _read("vllm_upstream_collect_env_system_info_vllm22518.txt")
    assert (upstream.torch, upstream.os) == ("2.5.1", "EulerOS 2.0 (SP10) (aarch64)")


def test_the_record_has_the_stack_fingerprints_keys_and_never_guesses_firmware():
    stack = _read("vllm_ascend_collect_env_310p3x8_issue2809.txt").as_stack()
    assert set(stack) >= {"python", "versions", "cann", "driver", "firmware", "chip", "card_count", "os"}
    assert stack["versions"] == {
        "torch": "2.5.1",
        "torch-npu": "2.5.1.post1",
        "vllm": "0.9.1",
        "vllm-ascend": "0.9.1",
        "transformers": "4.52.4",
    }
    assert stack["firmware"] is None and stack["cann"]["kernels"] is None


def test_triage_reports_the_stack_of_a_paste_and_triages_a_crashed_collect_env_as_a_log():
    report = triage_paths([ENV / "vllm_ascend_collect_env_310p3x8_issue2809.txt"])
    assert [s.stack.vllm_ascend for s in report.stacks] == ["0.9.1"]
    crashed = (ENV / "vllm_ascend_collect_env_crashed_err99999_issue380.txt").read_text()
    assert not looks_like_collect_env(crashed)
    first = triage_paths([ENV / "vllm_ascend_collect_env_crashed_err99999_issue380.txt"]).first
    assert str(first.diagnosis.code) == "ERR99999" and "AttributeError" in first.block.exception
