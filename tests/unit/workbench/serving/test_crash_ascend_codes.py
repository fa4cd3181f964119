"""crash.classify and false_ready read Ascend's error codes through the triage engine (what smoke, serve,
bisect and the sweeps report), keep every code-less signature, and never answer a coded error with a
bare "unknown"."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURES
from workbench.serving.crash import CrashKind, classify, false_ready

CORPUS = FIXTURES / "triage"
ENGINE_FAILED = "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}\n"


@pytest.mark.parametrize(
    ("fixture", "kind", "in_summary"),
    [
        ("va2712_hccl_comm_init_err02200_pp_310p.log", CrashKind.HCCL_INIT, "rank 1"),
        ("va4972_507014_aicore_timeout_with_watchdog.log", CrashKind.AICORE_TIMEOUT, "507014"),
        ("va1558_507033_set_device_dp.log", CrashKind.DEVICE_INIT, "507033"),
        ("va8186_507010_lost_heartbeat_310p.log", CrashKind.DEVICE_FAULT, "507010"),
        ("va692_500001_setprecisionmode_soc_910.log", CrashKind.CANN_INIT, "500001"),
        (
            "va37_ez1001_prompt_flash_attention_no_binary_310p.log",
            CrashKind.KERNEL_MISSING,
            "aclnnPromptFlashAttentionV3",
        ),
        ("va9372_negative_kv_cache_memory.log", CrashKind.OOM_KV_PROFILING, "KV cache"),
        ("va2629_207005_capture_begin_alloc_sq_cq.log", CrashKind.GRAPH_CAPTURE, "207005"),
    ],
)
def test_a_failed_start_with_ascend_codes_gets_its_family_code_and_verify_step(fixture, kind, in_summary):
    report = classify((CORPUS / fixture).read_text(encoding="utf-8") + ENGINE_FAILED, exit_code=1)
    assert report.kind is kind
    assert in_summary in report.summary
    assert "Verify: " in report.fix and report.evidence
    assert "\n" not in report.message()


def test_an_unknown_code_is_reported_with_its_code_never_as_a_bare_unknown():
    report = classify("RuntimeError: call aclnnFoo failed, detail:E69999: Inner Error!\n" + ENGINE_FAILED, exit_code=1)
    assert report.kind is CrashKind.UNKNOWN
    assert "E69999" in report.summary and "not in CANN's list" in report.summary
    assert report.summary != "the server stopped without a known signature"


def test_code_less_signatures_still_decide_what_they_always_did():
    for line, kind in [
        ("ValueError: No common block size for 16 (CPU_ATTN: [32, 64, 128]).", CrashKind.BLOCK_SIZE),
        (
            "ImportError: libascendcl.so: cannot open shared object file: No such file or directory",
            CrashKind.CANN_NOT_SOURCED,
        ),
        ("Bus error (core dumped)", CrashKind.SHM),
    ]:
        assert classify(line + "\n" + ENGINE_FAILED, exit_code=1).kind is kind


def test_an_injected_fault_still_wins_over_any_code():
    log = (
        "(EngineCore pid=2) ascend_backend.faults.InjectedFault: injected fault: op 'rms_norm' raised\n"
        "RuntimeError: ACL stream synchronize failed, error code:507035\n"
    )
    assert classify(log, exit_code=1).kind is CrashKind.INJECTED_FAULT
    assert false_ready("chat: HTTP 500", log).kind is CrashKind.INJECTED_FAULT


def test_a_first_request_that_faults_on_the_card_is_named_with_the_request():
    log = (CORPUS / "va2349_507035_stream_sync_at_tolist.log").read_text(encoding="utf-8")
    report = false_ready("chat: HTTP 500", log)
    assert report.kind is CrashKind.OPERATOR_EXECUTION
    assert "507035" in report.summary and "first request failed: chat: HTTP 500" in report.summary
    assert "compare-ops" in report.fix


def test_a_broken_knowledge_base_leaves_the_fallback_signatures_working(monkeypatch, tmp_path):
    from workbench.triage import knowledge

    monkeypatch.setattr(knowledge, "default_path", lambda: tmp_path / "missing.yaml")
    report = classify((CORPUS / "docs_faq17_207008_stream_resources.log").read_text() + ENGINE_FAILED, exit_code=1)
    assert report.kind is CrashKind.GRAPH_CAPTURE  # the code-less signature of the fallback
    unknown = classify("KeyError: 'x'\n" + ENGINE_FAILED, exit_code=1)
    assert any("error codes not looked up" in e for e in unknown.evidence)
