"""Crash classification: log signatures (worded as vLLM and CANN word them), signals, precedence."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURES
from workbench.check.shm import check_shm
from workbench.serving.crash import (
    SIGNAL_KINDS,
    CrashKind,
    ServerFailure,
    classify,
    false_ready,
    signal_name,
    start_timeout,
)
from workbench.stack.shm import RECOMMENDED_SHM_GIB, ShmStats

NOISE = """\
(APIServer pid=1) INFO 11-30 17:02:16 [api_server.py:1] vLLM API server version 0.32.0
(APIServer pid=1) WARNING 11-30 17:02:16 [system_utils.py:255] Found ulimit of 20000 ... `OSError: [Errno 24] Too many open files`
(EngineCore pid=2) WARNING 11-30 17:02:20 [cpu.py:1] pin_memory is not supported on CPU, falling back
(EngineCore pid=2) INFO 11-30 17:02:21 [default_loader.py:501] Loading weights took 0.08 seconds
"""

ENGINE_FAILED = (
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}"
)

CASES = [
    (CrashKind.BLOCK_SIZE, "(EngineCore pid=2) ValueError: No common block size for 16 (CPU_ATTN: [32, 64, 128])."),
    (
        CrashKind.KV_MEMORY,
        "ValueError: To serve at least one request with the model's max seq len (4096), (0.06 GiB KV cache is "
        "needed, which is larger than the available KV cache memory (0.00 GiB). Based on the available memory, "
        "the estimated maximum model length is 16.",
    ),
    (
        CrashKind.KV_MEMORY,
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`",
    ),
    (
        CrashKind.MODEL_NOT_FOUND,
        "OSError: /nonexistent/model does not appear to have a file named config.json. Checkout "
        "'https://huggingface.co//nonexistent/model/tree/main' for available files.",
    ),
    (CrashKind.MODEL_NOT_FOUND, "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name'"),
    (
        CrashKind.CANN_NOT_SOURCED,
        "ImportError: libascendcl.so: cannot open shared object file: No such file or directory",
    ),
    (
        CrashKind.VERSION_MISMATCH,
        "ImportError: /x/torch_npu/lib/libtorch_npu.so: undefined symbol: _ZN3c104impl8GPUTrace",
    ),
    (
        CrashKind.PORT_IN_USE,
        "OSError: [Errno 98] error while attempting to bind on address ('127.0.0.1', 8000): address already in use",
    ),
    (CrashKind.SHM, "RuntimeError: unable to write to file </torch_123_456_0>: No space left on device (28)"),
    (CrashKind.SHM, "Bus error (core dumped)"),
    (CrashKind.SEGFAULT, "Fatal Python error: Segmentation fault"),
    (CrashKind.OUT_OF_MEMORY, "torch.OutOfMemoryError: NPU out of memory. Tried to allocate 2.00 GiB"),
    (
        CrashKind.UNSUPPORTED_OP,
        "NotImplementedError: Could not run 'aten::_foo' with arguments from the 'NPU' backend.",
    ),
    (CrashKind.UNSUPPORTED_OP, "ValueError: Quantization method w8a8_dynamic is not supported on this platform"),
    (
        CrashKind.INJECTED_FAULT,
        "(EngineCore pid=2) ascend_backend.faults.InjectedFault: injected fault: op 'rms_norm' raised "
        "(ASCEND_BACKEND_FAULT / registry.inject)",
    ),
]


@pytest.mark.parametrize(("kind", "line"), CASES, ids=[f"{k.value}-{i}" for i, (k, _) in enumerate(CASES)])
def test_log_signatures(kind, line):
    report = classify(NOISE + line + "\n" + ENGINE_FAILED + "\n", exit_code=1)
    assert report.kind is kind
    assert any(line.strip()[:40] in ev for ev in report.evidence)
    assert report.fix and report.exit_code == 1


def test_context_lines_are_never_the_cause():
    # WARNING lines mention "not supported" and "Too many open files"; an exit after them said nothing.
    report = classify(NOISE, exit_code=1)
    assert report.kind is CrashKind.SILENT_EXIT


@pytest.mark.parametrize(
    ("code", "kind", "name"),
    [
        (-7, CrashKind.SHM, "SIGBUS"),
        (-11, CrashKind.SEGFAULT, "SIGSEGV"),
        (-9, CrashKind.KILLED, "SIGKILL"),
        (137, CrashKind.KILLED, "SIGKILL"),
    ],
)
def test_signals_of_the_server_process(code, kind, name):
    report = classify(NOISE, exit_code=code)
    assert (report.kind, report.signal_name) == (kind, name)
    assert name in report.message()


def test_signal_of_the_engine_child_is_recovered_from_the_log():
    log = (
        NOISE
        + "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': -7}\n"
    )
    report = classify(log, exit_code=1)
    assert report.kind is CrashKind.SHM and report.signal_name == "SIGBUS"
    worker = (
        NOISE
        + "(EngineCore pid=2) ERROR [multiproc_executor.py:316] Worker proc VllmWorker-0 died unexpectedly (exit code: -11), shutting down\n"
    )
    assert classify(worker, exit_code=1).kind is CrashKind.SEGFAULT


def test_specific_signature_beats_signal():
    # A child that printed "No common block size" then was killed is still a block-size problem.
    assert classify(NOISE + CASES[0][1], exit_code=-9).kind is CrashKind.BLOCK_SIZE


def test_timeout_and_false_ready():
    report = classify(NOISE, exit_code=None, timed_out=True, timeout_s=30)
    assert report.kind is CrashKind.START_TIMEOUT and "30 s" in report.summary
    assert "Loading weights" in report.evidence[0]
    assert start_timeout("", 5, None).kind is CrashKind.START_TIMEOUT
    ready = false_ready("chat: HTTP 500", NOISE + "(EngineCore pid=2) ERROR boom\n")
    assert ready.kind is CrashKind.FALSE_READY and "HTTP 500" in ready.summary
    assert ready.evidence[-1].endswith("ERROR boom")


def test_signal_name():
    assert signal_name(-9) == "SIGKILL" and signal_name(139) == "SIGSEGV"
    assert signal_name(0) is None and signal_name(1) is None and signal_name(None) is None


def test_server_failure_is_a_workbench_error_with_one_line_message():
    report = classify(NOISE + CASES[0][1], exit_code=1)
    error = ServerFailure(report)
    assert error.report is report
    assert "[block_size]" in str(error) and "fix:" in str(error) and "\n" not in str(error)


def test_unknown_crash_shows_the_last_exception_line_before_the_shutdown_noise():
    log = NOISE + (
        "(EngineCore pid=2) Traceback (most recent call last):\n"
        '(EngineCore pid=2)   File "x.py", line 3, in forward\n'
        "(EngineCore pid=2) KeyError: 'model.layers.0.mlp'\n"
        "(APIServer pid=1) INFO 11-30 17:03:00 [launcher.py:1] Shutting down FastAPI HTTP server.\n"
        "(APIServer pid=1) INFO 11-30 17:03:00 [launcher.py:1] Application shutdown complete.\n"
    )
    report = classify(log, exit_code=1)
    assert report.kind is CrashKind.UNKNOWN
    assert report.evidence[0].endswith("KeyError: 'model.layers.0.mlp'")
    assert "KeyError" in report.message()


def test_false_ready_names_the_cause_when_the_log_has_one():
    log = NOISE + (
        "(EngineCore pid=2) ascend_backend.faults.InjectedFault: injected fault: op 'rms_norm' raised "
        "(ASCEND_BACKEND_FAULT / registry.inject)\n"
        "(APIServer pid=1) ERROR 11-30 17:03:00 [serving_chat.py:1] EngineDeadError\n"
    )
    report = false_ready("chat: HTTP 500", log)
    assert report.kind is CrashKind.INJECTED_FAULT
    assert "first request failed: chat: HTTP 500" in report.summary
    assert "unset ASCEND_BACKEND_FAULT" in report.fix


def test_acl_graph_capture_failure_207008_gets_its_class_and_the_graph_mode_fix():
    log = (
        NOISE + (FIXTURES / "ascend" / "error_aclgraph_capture_207008_stream_resources.txt").read_text() + ENGINE_FAILED
    )
    report = classify(log, exit_code=1)
    assert report.kind is CrashKind.GRAPH_CAPTURE
    assert "207008" in report.evidence[-1] or "Stream" in " ".join(report.evidence)
    # docs/METHOD.md §13: graph mode off to confirm, then fewer capture sizes
    assert "enforce_eager: true" in report.fix and "cudagraph_capture_sizes" in report.fix and "§13" in report.fix


def test_a_silent_exit_points_at_shm_and_device_permissions():
    report = classify(NOISE, exit_code=1)
    assert report.kind is CrashKind.SILENT_EXIT and report.signal_name is None
    assert "/dev/shm" in report.fix and "/dev/davinci" in report.fix and "§4" in report.fix and "§6" in report.fix
    assert report.evidence == (NOISE.splitlines()[-1].strip(),)
    # Anything said at ERROR level (or a traceback) is not silent: the unknown class reads it instead.
    spoke = classify(NOISE + "(EngineCore pid=2) ERROR 11-30 17:03:00 [core.py:1] boom\n", exit_code=1)
    assert spoke.kind is CrashKind.UNKNOWN
    # A signal is not silent either, nor is a start that timed out.
    assert classify(NOISE, exit_code=-9).kind is CrashKind.KILLED
    assert classify(NOISE, exit_code=None, timed_out=True).kind is CrashKind.START_TIMEOUT


def test_the_unknown_fix_narrows_the_logs_instead_of_raising_them_all():
    report = classify(NOISE + "(EngineCore pid=2) KeyError: 'x'\n", exit_code=1)
    assert report.kind is CrashKind.UNKNOWN
    fix = report.fix
    assert "VLLM_LOGGING_LEVEL=ERROR" in fix and "ASCEND_GLOBAL_LOG_LEVEL=3" in fix and "focused_logging" in fix
    assert fix.index("ERROR") < fix.index("DEBUG") and "separately" in fix and "§9" in fix
    assert "VLLM_LOGGING_LEVEL=DEBUG" not in fix and "ASCEND_GLOBAL_LOG_LEVEL=1" not in fix


def test_crash_fixes_and_the_preflight_advise_one_shm_size():
    preflight = check_shm(ShmStats(FIXTURES, 64 * 2**20, 64 * 2**20)).fix
    size = f"--shm-size {RECOMMENDED_SHM_GIB}g"
    assert size in preflight
    for report in (classify(NOISE + "Bus error (core dumped)\n", exit_code=1), classify(NOISE, exit_code=1)):
        assert size in report.fix
    assert all(size in fix for kind, _, fix in SIGNAL_KINDS.values() if kind is CrashKind.SHM)
    assert "16g" not in " ".join(r.fix for r in (classify(NOISE + "Bus error\n", exit_code=1),))
