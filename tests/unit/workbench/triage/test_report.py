"""Many logs at once: events ordered across ranks and files, the first error named, consequences kept
after it; the three out-of-memory stages; unreadable inputs named without stopping the others."""

from __future__ import annotations

import os

import pytest

from tests.conftest import FIXTURES
from workbench.triage.kinds import FailureKind
from workbench.triage.render import render_text, report_dict
from workbench.triage.report import triage_paths, triage_text

CORPUS = FIXTURES / "triage"

RANK0 = """\
(Worker_TP0 pid=100) ERROR 09-04 09:50:20 [multiproc_executor.py:671] Traceback (most recent call last):
(Worker_TP0 pid=100) ERROR 09-04 09:50:20 [multiproc_executor.py:671] RuntimeError: ACL stream synchronize failed, error code:507046
"""
RANK1 = """\
[rank1]:[E904 09:50:30.000000000 compiler_depend.ts:1] [Rank 1] HCCL watchdog thread terminated with exception: boom
"""
RANK3_PLOG = """\
[INFO] RUNTIME(303,python):2025-09-04-09:49:59.000.000 [a.cc:1]1 launching
[ERROR] RUNTIME(303,python):2025-09-04-09:50:01.123.456 [device_error_core_proc.cc:333]1 ProcessStarsCoreErrorInfo:The error from device(chipId:3, dieId:0), there is an aivec error exception, core id is 5
[ERROR] RUNTIME(303,python):2025-09-04-09:50:01.123.500 [stream.cc:1]1 report error module_name=EZ9999
"""


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_the_earliest_error_across_ranks_is_first_and_the_year_comes_from_the_plog(tmp_path):
    _write(tmp_path, "worker0.log", RANK0)
    _write(tmp_path, "rank1.log", RANK1)
    _write(tmp_path, "ascend/log/debug/device-3/device-303_20250904095001000.log", RANK3_PLOG)
    report = triage_paths([tmp_path])
    first = report.first
    assert first.diagnosis.kind is FailureKind.OPERATOR_EXECUTION
    assert (first.block.place.device, first.block.place.pid) == (3, 303)  # from the text and the file name
    assert [e.when.isoformat() for e in report.events] == [
        "2025-09-04T09:50:01.123456",  # rank 3's plog
        "2025-09-04T09:50:20",  # rank 0, vLLM's time took the plog's year
        "2025-09-04T09:50:30",  # rank 1's watchdog: a consequence
    ]
    assert report.events[-1].diagnosis.consequence
    text = render_text(report)
    assert "first error: device 3, pid 303" in text and "later errors (2" in text


def test_a_consequence_is_never_first_while_a_cause_is_logged_even_when_earlier(tmp_path):
    _write(tmp_path, "rank1.log", RANK1.replace("09:50:30", "09:40:00"))
    _write(tmp_path, "worker0.log", RANK0)
    report = triage_paths([tmp_path])
    assert report.first.block.place.pid == 100 and report.first.diagnosis.kind is FailureKind.AICORE_TIMEOUT
    assert report.events[0].diagnosis.consequence  # earlier in time, listed first, not named the cause


@pytest.mark.parametrize(
    ("frame", "kind"),
    [
        ('vllm/model_executor/model_loader/default_loader.py", line 300, in load_weights', FailureKind.OOM_WEIGHTS),
        ('vllm_ascend/worker/worker.py", line 540, in determine_available_memory', FailureKind.OOM_KV_PROFILING),
        ('vllm_ascend/worker/model_runner_v1.py", line 5120, in capture_model', FailureKind.OOM_GRAPH_CAPTURE),
        ('vllm_ascend/worker/model_runner_v1.py", line 1932, in execute_model', FailureKind.OUT_OF_MEMORY),
    ],
)
def test_out_of_memory_is_named_by_the_stage_its_traceback_shows(frame, kind):
    log = (
        "(Worker_TP0 pid=7) ERROR 10-10 11:32:51 [multiproc_executor.py:671] Traceback (most recent call last):\n"
        f'(Worker_TP0 pid=7) ERROR 10-10 11:32:51 [multiproc_executor.py:671]   File "/x/{frame}\n'
        "(Worker_TP0 pid=7) ERROR 10-10 11:32:51 [multiproc_executor.py:671] RuntimeError: NPU out of memory. "
        "Tried to allocate 11.50 GiB (NPU 0; 60.97 GiB total capacity; 55.29 GiB already allocated)\n"
    )
    diagnosis = triage_text(log).first.diagnosis
    assert diagnosis.kind is kind
    assert "NPU out of memory" in diagnosis.evidence[-1]


def test_an_unknown_code_comes_out_with_its_code_its_digits_meaning_and_its_block():
    first = triage_text("RuntimeError: foo:bar NPU function error: x, error code is 507777\n").first
    d = first.diagnosis
    assert d.kind is FailureKind.UNKNOWN and not d.known
    assert str(d.code) == "507777" and "CANN runtime" in d.meaning and "internal" in d.meaning
    assert "no entry" in d.basis and first.block.lines == (
        "RuntimeError: foo:bar NPU function error: x, error code is 507777",
    )


def test_unreadable_inputs_are_named_and_the_others_still_read(tmp_path):
    good = _write(tmp_path, "ok.log", RANK0)
    binary = tmp_path / "core.dump"
    binary.write_bytes(b"\x7fELF\x00\x01\x02" * 100)
    damaged = tmp_path / "damaged.log"
    damaged.write_bytes(RANK0.encode() + b"\xff\xfe broken \xc3\x28 bytes\n")
    report = triage_paths([tmp_path, tmp_path / "missing.log"])
    reasons = {p.path.name: p.reason for p in report.problems}
    assert reasons["core.dump"].startswith("is binary") and reasons["missing.log"].startswith("no such file")
    assert {f.path.name for f in report.inputs} == {good.name, damaged.name}
    assert len([e for e in report.events if e.diagnosis.code]) == 2  # the damaged file is still triaged


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_a_file_without_read_permission_is_a_problem_not_a_crash(tmp_path):
    locked = _write(tmp_path, "locked.log", RANK0)
    locked.chmod(0)
    try:
        report = triage_paths([locked])
    finally:
        locked.chmod(0o644)
    assert report.inputs == () and "cannot be read" in report.problems[0].reason


def test_the_json_report_holds_every_event_with_place_code_and_advice():
    data = report_dict(triage_paths([CORPUS / "va4972_507014_aicore_timeout_with_watchdog.log"]))
    first = data["first_error"]
    assert (first["kind"], first["code"], first["place"]["device"], first["place"]["pid"]) == (
        "aicore_timeout",
        "507014",
        4,
        285,
    )
    assert first["verify"].startswith("ascend-workbench") and first["causes"] and first["cites"]
    assert len(data["events"]) == 2 and data["events"][0]["consequence"]
