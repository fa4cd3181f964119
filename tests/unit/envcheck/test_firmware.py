"""Driver/firmware installed on disk versus loaded (reboot needed) and the driver's firmware range."""

from __future__ import annotations

from tests.unit.envcheck.fakes import board_with_firmware, build_ascend_tree, fixture_text, make_ctx
from workbench.envcheck.firmware import check_firmware, read_installed_firmware
from workbench.envcheck.npu_smi import NpuSmiReading, parse_board, parse_npu_smi_info
from workbench.envcheck.result import Status


def reading(table: str, board: str | None) -> NpuSmiReading:
    return NpuSmiReading(
        "npu-smi", table=parse_npu_smi_info(fixture_text(table)), board=parse_board(board) if board else None
    )


def test_everything_loaded_matches_disk(tmp_path):
    ctx = make_ctx(tmp_path, ascend_root=build_ascend_tree(tmp_path / "Ascend").root)
    results = check_firmware(
        read_installed_firmware(ctx),
        reading("npu_smi_info_910b4_8card_atlas800i_a2_healthy.txt", board_with_firmware("7.7.0.1.231")),
        ctx,
    )
    assert [r.status for r in results] == [Status.PASS] * 3, results


def test_driver_installed_after_boot_needs_reboot(tmp_path):
    ctx = make_ctx(tmp_path, ascend_root=build_ascend_tree(tmp_path / "Ascend").root)
    driver, firmware, _ = check_firmware(
        read_installed_firmware(ctx), reading("npu_smi_info_910b2_8card_23.0.7_issue362.txt", None), ctx
    )
    assert driver.status is Status.FAIL
    assert "driver 25.0.rc1.1 on disk is newer than the loaded 23.0.7" in driver.observed and "reboot" in driver.fix
    assert firmware.status is Status.SKIP  # no board output: loaded firmware unknown


def test_older_driver_on_disk_also_needs_reboot(tmp_path):
    ctx = make_ctx(
        tmp_path, ascend_root=build_ascend_tree(tmp_path / "Ascend", driver="driver_24.1.rc2.2_version.info").root
    )
    driver = check_firmware(
        read_installed_firmware(ctx), reading("npu_smi_info_910b4_8card_atlas800i_a2_healthy.txt", None), ctx
    )[0]
    assert driver.status is Status.FAIL and "is older than the loaded 25.0.rc1.1" in driver.observed


def test_firmware_upgrade_pending_and_outside_driver_range(tmp_path):
    ctx = make_ctx(tmp_path, ascend_root=build_ascend_tree(tmp_path / "Ascend").root)
    # The captured board output reports firmware 7.8.0.6.201; disk has 7.7.0.1.231 and the 25.0.rc1.1
    # driver accepts [7.0.0, 7.7.99].
    _, firmware, compatible = check_firmware(
        read_installed_firmware(ctx),
        reading("npu_smi_info_910b4_8card_atlas800i_a2_healthy.txt", fixture_text("npu_smi_info_t_board_i0_910b.txt")),
        ctx,
    )
    assert (
        firmware.status is Status.FAIL
        and "firmware 7.7.0.1.231 on disk is older than the loaded 7.8.0.6.201" in firmware.observed
    )
    assert compatible.status is Status.FAIL and "7.8.0.6.201 outside" in compatible.observed


def test_no_install_files_skip(tmp_path):
    ctx = make_ctx(tmp_path)
    results = check_firmware(read_installed_firmware(ctx), NpuSmiReading(None, absent="npu-smi not found"), ctx)
    assert {r.status for r in results} == {Status.SKIP}
