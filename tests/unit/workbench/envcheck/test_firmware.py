"""Driver/firmware installed on disk versus loaded (reboot needed) and the driver's firmware range."""

from __future__ import annotations

from tests.unit.workbench.envcheck.fakes import board_with_firmware, build_ascend_tree, fixture_text, make_ctx
from workbench.envcheck.firmware import check_driver_cann, check_firmware
from workbench.envcheck.result import Status
from workbench.stack.cann import driver_requirements, find_cann
from workbench.stack.firmware import read_installed_firmware
from workbench.stack.npu_smi import NpuSmiReading, parse_board, parse_npu_smi_info


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


def _driver_cann(tmp_path, *, cann="8.2.RC1", driver="driver_25.0.rc1.1_version.info", edit_driver=None):
    tree = build_ascend_tree(tmp_path / "Ascend", cann=cann, driver=driver)
    if edit_driver is not None:
        info = tree.root / "driver" / "version.info"
        info.write_text(edit_driver(info.read_text()))
    ctx = make_ctx(tmp_path, ascend_root=tree.root)
    return check_driver_cann(read_installed_firmware(ctx), driver_requirements(find_cann(ctx)))


def test_driver_in_the_toolkits_compatible_list_passes(tmp_path):
    # CANN 8.2.RC1 lists families C15..C21 and C23; driver 25.0.rc1.1 is V100R001C21.
    result = _driver_cann(tmp_path)
    assert result.status is Status.PASS and "family V100R001C21" in result.observed
    # CANN 8.1.RC1 also states runtime minimums (ascendhal 4.0.0); driver 24.1.rc2.2 (C18, ascendhal 7.35.23) fits.
    older = _driver_cann(tmp_path / "b", cann="8.1.RC1", driver="driver_24.1.rc2.2_version.info")
    assert older.status is Status.PASS and "runtime/version.info" in older.observed


def test_driver_family_the_toolkit_does_not_list_warns(tmp_path):
    # Derived from the 25.0.rc1.1 file: an inner version of family C13, which CANN 8.2.RC1 does not list.
    result = _driver_cann(
        tmp_path, edit_driver=lambda t: t.replace("Innerversion=V100R001C21", "Innerversion=V100R001C13")
    )
    assert result.status is Status.WARN and "V100R001C13" in result.observed and "compatible_version" in result.observed


def test_driver_component_below_the_runtimes_requirement_fails(tmp_path):
    # Derived from the 24.1.rc2.2 file: ascendhal 3.9.0, below CANN 8.1.RC1 runtime's required 4.0.0.
    result = _driver_cann(
        tmp_path,
        cann="8.1.RC1",
        driver="driver_24.1.rc2.2_version.info",
        edit_driver=lambda t: t.replace("ascendhal_version=7.35.23", "ascendhal_version=3.9.0"),
    )
    assert result.status is Status.FAIL and "ascendhal 3.9.0 < required 4.0.0" in result.observed
    assert "reboot" in result.fix


def test_driver_cann_check_skips_without_files(tmp_path):
    assert _driver_cann(tmp_path, driver=None).status is Status.SKIP
    assert _driver_cann(tmp_path / "b", cann=None).status is Status.SKIP
