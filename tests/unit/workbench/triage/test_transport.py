"""What carried a log (workbench.triage.transport): carriers that mark most lines come off, lines keep their
count, and triage reads a carried log as it reads the plain one (benchmarks/mangling.py's LOG_WAYS)."""

from __future__ import annotations

import pytest

from workbench.triage.api import triage_text
from workbench.triage.kinds import FailureKind
from workbench.triage.transport import unwrap

# vllm-ascend#672 (development half): vLLM's V0-fallback warning, then the HCCL communicator the MoE
# all-to-all needs fails to initialise (torch_npu's ERR02200 over CANN's EE9999)
HCCL_AFTER_WARNING = """WARNING 04-27 03:09:47 [arg_utils.py:1731] --additional-config is not supported by the V1 Engine. Falling back to V0.
[rank0]:     self.moe_all_to_all_group_name = backend.get_hccl_comm_name(
[rank0]: RuntimeError: create_config:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:102 HCCL function error: hcclCommInitRootInfoConfig(numRanks, &rootInfo, rank, config, &(comm->hcclComm_)), error code is 15
[rank0]: [ERROR] 2025-04-27-03:11:08 (PID:540988, Device:0, RankID:0) ERR02200 DIST call hccl api failed.
[rank0]: EE9999: Inner Error!"""

CARRIERS = {
    "quoted": lambda line: f"> {line}",
    "quoted twice": lambda line: f"> > {line}",
    "cri": lambda line: f"2025-06-01T08:00:00.123456789Z stderr F {line}",
    "kubectl --timestamps": lambda line: f"2025-06-01T08:00:00.123456789+08:00 {line}",
    "compose": lambda line: f"vllm-ascend-1  | {line}",
    "indented": lambda line: f"    {line}",
    "coloured": lambda line: line.replace("WARNING", "\x1b[33mWARNING\x1b[0m").replace("ERROR", "\x1b[31mERROR\x1b[0m"),
}


@pytest.mark.parametrize("carrier", CARRIERS.values(), ids=CARRIERS.keys())
def test_a_carrier_on_every_line_comes_off_and_the_lines_keep_their_count(carrier):
    lines = HCCL_AFTER_WARNING.splitlines()
    assert list(unwrap(carrier(line) for line in lines)) == lines


@pytest.mark.parametrize("carrier", CARRIERS.values(), ids=CARRIERS.keys())
def test_triage_reads_a_carried_log_as_it_reads_the_plain_one(carrier):
    plain = triage_text(HCCL_AFTER_WARNING).first.diagnosis
    carried = triage_text("\n".join(carrier(line) for line in HCCL_AFTER_WARNING.splitlines())).first.diagnosis
    assert (plain.kind, plain.code.value) == (carried.kind, carried.code.value) == (FailureKind.HCCL_INIT, "EE9999")


def test_a_line_that_only_looks_carried_is_left_alone():
    """One 'name | ' line in a plain log is a table row or prose, not docker compose's column; a traceback's own
    indentation stays (only what every line shares comes off)."""
    lines = [
        "Traceback (most recent call last):",
        '  File "x.py", line 1, in <module>',
        "Name | Value",
        "ValueError: x",
    ]
    assert list(unwrap(lines)) == lines


def test_the_warning_that_opened_a_block_decides_only_when_its_errors_name_nothing():
    """With every line tagged by one process, as vLLM >= 0.10 tags an engine core's output, the V0-fallback
    warning joins the block of the error after it: the HCCL failure still decides (vllm-ascend#672), while a
    traceback that names nothing is the fallback's refusal (vllm-ascend#1963, the Mllama architecture)."""
    tag = "(EngineCore_DP0 pid=702) "
    hccl = "\n".join(tag + line for line in HCCL_AFTER_WARNING.splitlines())
    assert triage_text(hccl).first.diagnosis.kind is FailureKind.HCCL_INIT
    refused = "\n".join(
        tag + line
        for line in (
            "WARNING 07-23 07:45:00 [arg_utils.py:1735] ['MllamaForConditionalGeneration'] is not supported by the "
            "V1 Engine. Falling back to V0.",
            "Traceback (most recent call last):",
            '  File "/usr/local/python3.10.17/bin/vllm", line 8, in <module>',
            "    sys.exit(main())",
            "RuntimeError: Engine core initialization failed.",
        )
    )
    assert triage_text(refused).first.diagnosis.kind is FailureKind.UNSUPPORTED_FEATURE
