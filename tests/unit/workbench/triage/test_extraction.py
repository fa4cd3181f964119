"""Reading a log into error blocks: line heads, codes, frames, operators, places, times, grouping.

Lines are the formats of public posts (tests/fixtures/triage/SOURCES.md); exact expectations, and the
cases that must not match (a task id is not an error code, an INFO line is never an error).
"""

from __future__ import annotations

import datetime as dt

import pytest

from workbench.triage.blocks import RAW_QUIET_LINES, extract_blocks, trigger_pattern
from workbench.triage.codes import CodeKind, ErrorCode, find_codes
from workbench.triage.frames import Frame, calling_frame, find_frames
from workbench.triage.knowledge import load_knowledge_base
from workbench.triage.line_format import Level, parse_line
from workbench.triage.operators import find_operators, suite_op
from workbench.triage.timestamps import make_time

KB = load_knowledge_base()
TRIGGER = trigger_pattern(tuple(s.pattern for s in KB.signatures))


def blocks(text: str):
    return list(extract_blocks(text.splitlines(), TRIGGER))


# -- line heads -------------------------------------------------------------------------------------


def test_plog_record_head():
    head = parse_line(
        "[ERROR] RUNTIME(129510,all__):2026-01-20-09:48:14.622.900 [stars_engine.cc:1502]133843 ProcLogicCqReport:x"
    )
    assert (head.stream, head.level, head.pid, head.plog) == ("pid 129510", Level.ERROR, 129510, True)
    assert head.time.moment == dt.datetime(2026, 1, 20, 9, 48, 14, 622900) and head.time.has_year
    info = parse_line("[INFO] GE(1,python):2026-01-20-09:48:14.622.900 [a.cc:1]2 ok")
    assert info.level is Level.CONTEXT


def test_nested_vllm_prefixes_name_the_innermost_writer_and_its_rank():
    head = parse_line(
        "(EngineCore_1 pid=113803) (VllmWorker rank=0 pid=114020) ERROR 07-01 08:38:50 "
        "[multiproc_executor.py:492] RuntimeError: x"
    )
    assert (head.stream, head.pid, head.rank, head.worker) == (
        "VllmWorker rank=0 pid=114020",
        114020,
        0,
        "VllmWorker rank=0",
    )
    assert head.body == "RuntimeError: x" and not head.time.has_year
    tp = parse_line("(Worker_DP0_TP7_EP7 pid=2112) ERROR 12-11 09:09:33 [multiproc_executor.py:822] x")
    assert (tp.rank, tp.pid) == (7, 2112)


def test_c10_log_month_and_day_run_together_and_torchrun_gives_the_rank():
    head = parse_line("[rank1]:[E324 13:00:25.428029551 compiler_depend.ts:574] [Rank 1] Watchdog caught")
    assert (head.rank, head.level, head.stream) == (1, Level.ERROR, "rank 1")
    assert head.time.moment == dt.datetime(1900, 3, 24, 13, 0, 25, 428029)
    october = parse_line("[W1015 16:32:20.401777530 compiler_depend.ts:227] Warning: NPU warning")
    assert (october.time.moment.month, october.time.moment.day, october.level) == (10, 15, Level.CONTEXT)


def test_torch_npu_stamp_and_message_codes_carry_pid_time_and_rank():
    stamp = parse_line("[ERROR] 2025-06-03-14:54:23 (PID:8648, Device:0, RankID:-1) ERR00100 PTA call acl api failed.")
    assert (stamp.pid, stamp.rank, stamp.level, stamp.stream, stamp.raw) == (8648, None, Level.ERROR, "pid 8648", True)
    ranked = parse_line("[rank1]: [ERROR] 2025-04-08-18:07:20 (PID:1292363, Device:1, RankID:1) ERR01100 OPS")
    assert (ranked.rank, ranked.pid, ranked.stream) == (1, 1292363, "rank 1")
    message = parse_line("EH9999[PID: 285] 2025-12-12-12:10:10.639.672 (EH9999):  [Query][Status]x")
    assert message.time.moment == dt.datetime(2025, 12, 12, 12, 10, 10, 639672) and message.pid == 285
    dist = parse_line("[285] [2025-12-12 12:10:10:644] torch.distributed: [ERROR] [479] Find exception")
    assert (dist.pid, dist.level, dist.time.moment.microsecond) == (285, Level.ERROR, 644000)


def test_old_vllm_logger_and_uvicorn():
    old = parse_line("ERROR 03-05 07:15:39 engine.py:387] NPU out of memory.")
    assert (old.level, old.body) == (Level.ERROR, "NPU out of memory.")
    assert parse_line("INFO:     Started server process [1]").level is Level.CONTEXT


# -- codes ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "codes"),
    [
        ("RuntimeError: ACL stream synchronize failed, error code:507035", [("acl", "507035")]),
        ("aclrtSetDeviceImpl: open device 0 failed, runtime result = 107001.", [("acl", "107001")]),
        (
            "rtMemcpy:ErrCode=107030, desc=[the current capture mode does not support this operation]",
            [("acl", "107030")],
        ),
        ("rtKernelLaunchWithHandleV2 failed: 507035", [("acl", "507035")]),
        ("error no is 561103 & error msg is ERR00100", [("acl", "561103"), ("torch_npu", "ERR00100")]),
        ("Insufficient_Stream_Resources(EL0009): The stream", [("message", "EL0009")]),
        ("module_name=EZ9999", [("message", "EZ9999")]),
        ("HCCL function error: hcclCommInitRootInfoConfig(numRanks), error code is 1", [("hccl", "1")]),
        ("OPS function error: HcclAllreduce, error code is 6", [("hccl", "6")]),
        ("[hccl_socket_manager.cc:54] [2717288][ServerInit]call trace: hcclRet -> 19", [("hccl", "19")]),
        ("[hccl_socket_manager.cc:830] [2734049][Wait][LinksEstablishCompleted] is failed. ret[9].", [("hccl", "9")]),
        ("[api_c.cc:1] aclrtMalloc failed, ret[207001]", [("acl", "207001")]),
        # vllm-ascend#6018: Chinese prose names the code ('error code' in Chinese)
        ("并发压测出现报错码507011", [("acl", "507011")]),
        ("错误码：507035", [("acl", "507035")]),
        # never codes: ids, sizes, hex driver codes, c10's month-day stamp, numbers too long
        ("Task run failed, device_id=5, stream_id=1206, task_id=507015", []),
        ("Failed to open device, retCode=0x7020014, deviceId=0.", []),
        ("[E1212 12:10:10.131512730 compiler_depend.ts:1675]", []),
        ("GEInitialize failed. ge result = 4294967295", []),
        ("error code = 0x10, dump info", []),
        ("报错信息如下 507011 个请求", []),
    ],
)
def test_codes_only_where_the_text_says_they_are_codes(line, codes):
    assert [(c.kind.value, c.value) for c in find_codes(line)] == codes


def test_code_priority_ranks_numeric_over_message_over_internal_over_torch_npu():
    ranks = [ErrorCode(k, v).priority for k, v in
             [(CodeKind.ACL, "507015"), (CodeKind.MESSAGE, "EI0002"), (CodeKind.MESSAGE, "EZ9999"), (CodeKind.TORCH_NPU, "ERR00100")]]  # fmt: skip
    assert ranks == sorted(ranks, reverse=True) and len(set(ranks)) == 4


# -- frames and operators -----------------------------------------------------------------------------


def test_the_calling_frame_skips_torch_forwarding():
    frames = (
        *find_frames('  File "/x/vllm_ascend/quantization/w8a8.py", line 95, in apply'),
        *find_frames('  File "/y/site-packages/torch/_ops.py", line 1116, in call'),
    )
    assert calling_frame(frames) == Frame("/x/vllm_ascend/quantization/w8a8.py", 95, "apply")
    assert str(calling_frame(frames)) == "vllm_ascend/quantization/w8a8.py:95 in apply"
    only_library = tuple(find_frames('  File "/usr/lib/python3.11/multiprocessing/process.py", line 108, in run'))
    assert calling_frame(only_library) == only_library[0]
    assert calling_frame(()) is None


def test_a_paste_that_lost_its_line_breaks_keeps_every_frame_and_the_process():
    # vllm-ascend #1617 posted its traceback as one line: each frame and its process tag run on.
    tag = "(VllmWorkerProcess pid=270962) ERROR 07-03 19:33:28 [multiproc_worker_utils.py:238]"
    line = (
        f'{tag} File "/e/vllm_ascend/models/qwen2_5_vl.py", line 84, in forward {tag} q, k, v = self.split_qkv(x) '
        f'{tag} File "/e/vllm/model_executor/models/qwen2_5_vl.py", line 262, in split_qkv {tag} RuntimeError: x'
    )
    assert [f.line for f in find_frames(line)] == [84, 262]
    (block,) = blocks('/p/torch/nn/modules/module.py", line 1747, in _call_impl ' + line)
    assert str(calling_frame(block.frames)) == "vllm/model_executor/models/qwen2_5_vl.py:262 in split_qkv"
    assert block.place.pid == 270962


def test_operators_most_specific_first_and_mapped_to_the_suite():
    line = "RuntimeError: call aclnnQuantMatmulWeightNz failed; op[QuantBatchMatmulV3] from torch_npu.npu_quant_matmul("
    assert find_operators(line) == ["aclnnQuantMatmulWeightNz", "npu_quant_matmul", "QuantBatchMatmulV3"]
    assert suite_op(("aclnnQuantMatmulWeightNz",), KB) == "w8a8_linear"
    assert suite_op(("the current working", "aclnnRmsNorm"), KB) == "rms_norm"
    assert suite_op(("aclnnPromptFlashAttentionV3",), KB) == "prefill_attention"
    assert suite_op(("SomethingElse",), KB) is None
    assert find_operators("working operator name is aclnnRmsNorm.")[0] == "aclnnRmsNorm"


# -- blocks -------------------------------------------------------------------------------------------


def test_interleaved_workers_make_one_block_each_and_info_lines_end_a_block():
    text = "\n".join([
        "(Worker_TP0 pid=10) ERROR 01-16 11:51:23 [m.py:1] Traceback (most recent call last):",
        "(Worker_TP1 pid=11) ERROR 01-16 11:51:23 [m.py:1] Traceback (most recent call last):",
        "(Worker_TP0 pid=10) ERROR 01-16 11:51:23 [m.py:1] RuntimeError: ACL stream synchronize failed, error code:507015",
        "(Worker_TP1 pid=11) ERROR 01-16 11:51:23 [m.py:1] RuntimeError: ACL stream synchronize failed, error code:507035",
        "(Worker_TP0 pid=10) INFO 01-16 11:51:24 [m.py:1] shutting down",
        "(Worker_TP0 pid=10) ERROR 01-16 11:51:25 [m.py:1] ValueError: later",
    ])  # fmt: skip
    found = blocks(text)
    assert [(b.place.pid, [c.value for c in b.codes], b.first_line, b.last_line) for b in found] == [
        (10, ["507015"], 1, 3),
        (11, ["507035"], 2, 4),
        (10, [], 6, 6),
    ]


def test_plog_records_group_by_time_not_by_the_info_records_between():
    rec = "[ERROR] RUNTIME(7,python):2026-01-20-09:48:{s} [a.cc:1]1 {m}"
    text = "\n".join([
        rec.format(s="14.000.000", m="Task run failed, device_id=5"),
        "[INFO] RUNTIME(7,python):2026-01-20-09:48:14.100.000 [a.cc:2]1 unrelated",
        rec.format(s="14.500.000", m="module_name=EZ9999"),
        rec.format(s="30.000.000", m="rtSetDevice:ErrCode=107001"),
    ])  # fmt: skip
    found = blocks(text)
    assert [[c.value for c in b.codes] for b in found] == [["EZ9999"], ["107001"]]
    assert found[0].lines[0].endswith("Task run failed, device_id=5") and len(found[0].lines) == 2
    assert found[0].place.device == 5


def test_a_plog_block_is_timed_by_its_first_coded_record_not_the_benign_errors_before_it():
    benign = "[ERROR] PROFILING(7,python):2026-01-20-09:48:{s} [p.cc:1]12 MsprofCtrlCallback:profiling is not started"
    fault = "[ERROR] RUNTIME(7,python):2026-01-20-09:48:14.{s} [a.cc:1]31 {m}"
    text = "\n".join([
        *(benign.format(s=f"1{i}.000.000") for i in range(5)),  # one a second: the 2 s gap never opens
        fault.format(s="400.000", m="ProcLogicCqReport:Task run failed, device_id=5"),  # same thread as the code
        fault.format(s="500.000", m="module_name=EZ9999"),
    ])  # fmt: skip
    (block,) = blocks(text)
    assert len(block.lines) == 7
    assert block.time.moment == dt.datetime(2026, 1, 20, 9, 48, 14, 400000)


def test_a_chained_traceback_is_one_block_and_a_new_one_after_an_exception_is_another():
    text = "\n".join([
        "WorkerProc hit an exception.",
        "Traceback (most recent call last):",
        '  File "/a/vllm/x.py", line 1, in f',
        "KeyError: 'a'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "/a/vllm/y.py", line 2, in g',
        "RuntimeError: error code is 507015",
        "Traceback (most recent call last):",
        '  File "/a/vllm/z.py", line 3, in h',
        "ValueError: another",
    ])  # fmt: skip
    found = blocks(text)
    assert [(b.first_line, b.last_line, b.exception) for b in found] == [
        (2, 10, "RuntimeError: error code is 507015"),
        (11, 13, "ValueError: another"),
    ]
    assert [f.function for f in found[0].frames] == ["f", "g"]


def test_raw_output_after_a_traceback_does_not_join_it():
    progress = [f"Loading safetensors checkpoint shards: {n}% Completed" for n in range(RAW_QUIET_LINES + 2)]
    text = "\n".join(
        ["Traceback (most recent call last):", '  File "/a/x.py", line 1, in f', "KeyError: 'a'", *progress]
    )
    (block,) = blocks(text)
    assert block.last_line == 3


def test_two_processes_on_one_stderr_stay_apart_and_a_stamp_after_a_warning_joins_it():
    text = "\n".join([
        "[rank7]:[E1212 12:10:10.131512730 c.ts:1] [Rank 7] HCCL watchdog thread terminated with exception:",
        "[ERROR] 2025-12-12-12:10:10 (PID:402, Device:7, RankID:-1) ERR02005 DIST internal error",
        "[285] [2025-12-12 12:10:10:644] torch.distributed: [ERROR] [479] x error code is 507014",
        "[ERROR] 2025-12-12-12:10:10 (PID:285, Device:4, RankID:-1) ERR00100 PTA call acl api failed",
        "[Error]: The aicore execution times out.",
    ])  # fmt: skip
    found = blocks(text)
    assert [(b.place.pid, b.place.device, b.place.rank, b.last_line) for b in found] == [
        (402, 7, 7, 2),
        (285, 4, None, 5),
    ]


def test_times_and_years():
    assert make_time(None, 2, 29, "01:02:03").resolve(2023) == dt.datetime(2023, 2, 28, 1, 2, 3)
    assert make_time(None, 2, 29, "01:02:03").resolve(2024) == dt.datetime(2024, 2, 29, 1, 2, 3)
    assert make_time(2025, 13, 1, "01:02:03") is None
    assert make_time(2025, 7, 8, "19:23:04", "799.485").moment.microsecond == 799485
    assert make_time(None, 3, 24, "13:00:25", "428029551").iso() == "03-24T13:00:25.428029"
