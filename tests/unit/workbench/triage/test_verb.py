"""`ascend-workbench triage LOG_OR_DIR... [--json OUT]` through the real command line."""

from __future__ import annotations

import json

from tests.conftest import FIXTURES
from workbench.cli import main

CORPUS = FIXTURES / "triage"


def test_triage_of_a_directory_prints_the_first_rank_operator_cause_fix_and_verify(tmp_path, capsys):
    out = tmp_path / "report" / "triage.json"
    code = main(["triage", str(CORPUS / "va2712_hccl_comm_init_err02200_pp_310p.log"), "--json", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    assert "first error: rank 1 (device 1, pid 7226" in printed
    assert "[hccl_init]" in printed and "operator: hcclCommInitRootInfoConfig" in printed
    assert "likely causes (most likely first):" in printed and "fix:" in printed
    assert "verify: ascend-workbench check (group npu-smi)" in printed
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["first_error"]["code"] == "ERR02200" and data["first_error"]["place"]["rank"] == 1


def test_a_collect_env_paste_reports_the_stack_it_describes(capsys):
    code = main(["triage", str(FIXTURES / "collect_env" / "vllm_ascend_collect_env_910b2x8_issue362.txt")])
    printed = capsys.readouterr().out
    assert code == 0
    assert "stack (" in printed and "torch-npu 2.5.1.dev20250218, CANN 8.0.0, driver 23.0.7, 8 x 910B2" in printed


def test_nothing_readable_is_one_line_naming_the_paths_and_exit_2(tmp_path, capsys):
    binary = tmp_path / "trace.bin"
    binary.write_bytes(b"\x00\x01\x02")
    code = main(["triage", str(tmp_path / "nope.log"), str(binary)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "nope.log: no such file or directory" in err and "trace.bin: is binary" in err
    assert "give log files or a directory of logs" in err


def test_a_broken_knowledge_base_is_one_line_naming_the_file(tmp_path, capsys):
    codes = tmp_path / "codes.yaml"
    codes.write_text("name: x\nreferences: {}\n", encoding="utf-8")
    code = main(["triage", str(CORPUS), "--codes", str(codes)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and str(codes) in err and "\n" not in err
