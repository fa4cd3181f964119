"""npu-smi parsing on the captured real outputs, and the card/health/memory checks."""

from __future__ import annotations

import pytest

from tests.unit.workbench.check.fakes import fixture_text, install_fake_npu_smi, make_ctx
from workbench.check.npu_smi import check_cards, check_health, check_memory
from workbench.check.result import Status
from workbench.stack.npu_smi import NpuSmiParseError, NpuSmiReading, parse_board, parse_npu_smi_info, read_npu_smi
from workbench.stack.presence import NpuPresence

HERE = NpuPresence(True, "test machine")
NOWHERE = NpuPresence(False, "no Ascend NPU here")


def table(name: str):
    return parse_npu_smi_info(fixture_text(name))


def test_910b4_eight_cards_healthy():
    t = table("npu_smi_info_910b4_8card_atlas800i_a2_healthy.txt")
    assert (t.smi_version, t.driver_version) == ("25.0.rc1.1", "25.0.rc1.1")
    assert t.npu_ids == tuple(range(8))
    assert {c.name for c in t.chips} == {"910B4"} and {c.health for c in t.chips} == {"OK"}
    first = t.chips[0]
    assert (first.power_w, first.temp_c, first.bus_id) == (87.2, 33, "0000:C1:00.0")
    assert (first.hbm_used_mb, first.hbm_total_mb, first.memory_total_mb) == (2654, 32768, 0)
    assert t.processes == ()


def test_910b2_hbm_pairs_without_space_before_slash():
    t = table("npu_smi_info_910b2_8card_23.0.7_issue362.txt")
    assert t.driver_version == "23.0.7"
    assert [c.hbm_used_mb for c in t.chips] == [29954, 29951, 29950, 29951, 3347, 3350, 3347, 3347]
    assert {c.hbm_total_mb for c in t.chips} == {65536}


def test_310p3_has_no_hbm_and_sparse_npu_ids():
    t = table("npu_smi_info_310p3_8chip_24.1.0.1_issue2809.txt")
    assert t.npu_ids == (0, 32, 96, 32768, 32800, 32832, 32864, 32896)
    chip = t.chips[0]
    assert chip.hbm_total_mb is None and chip.power_w is None  # Power column says NA
    assert (chip.device_used_mb, chip.device_total_mb) == (1844, 21527)


def test_a3_two_chips_per_npu_and_process_row():
    t = table("npu_smi_info_a3_ascend910_phyid_with_process.txt")
    assert [(c.npu_id, c.chip_id) for c in t.chips] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert t.chips[1].power_w is None  # '-' on the second chip
    assert t.chips[3].hbm_used_mb == 10568
    assert [(p.npu_id, p.chip_id, p.pid, p.name, p.memory_mb) for p in t.processes] == [(1, 1, 990711, "python", 7746)]


def test_trailing_spaces_and_process_table():
    t = table("npu_smi_info_910b2c_2card_with_process.txt")
    assert t.driver_version == "23.0.2.1" and len(t.chips) == 2
    assert t.processes[0].pid == 124528 and t.processes[0].memory_mb == 17400


def test_masked_bus_id_and_310b4_alarm():
    assert table("npu_smi_info_910b4_1card_masked_busid_25.0.rc1.1.txt").chips[0].bus_id == "xxxx:xx:xx.x"
    alarm = table("npu_smi_info_310b4_health_alarm.txt").chips[0]
    assert (alarm.name, alarm.health, alarm.bus_id, alarm.device_used_mb, alarm.device_total_mb) == (
        "310B4",
        "Alarm",
        "NA",
        3628,
        15609,
    )


def test_board_firmware_version():
    board = parse_board(fixture_text("npu_smi_info_t_board_i0_910b.txt"))
    assert board["Firmware Version"] == "7.8.0.6.201" and board["Software Version"] == "25.5.1"


def test_error_text_is_not_a_table():
    with pytest.raises(NpuSmiParseError):
        parse_npu_smi_info(fixture_text("npu_smi_error_dcmi_init_failed_-8005.txt"))


def reading(name: str) -> NpuSmiReading:
    return NpuSmiReading("npu-smi", table=table(name))


def test_cards_pass_and_skip_and_fail():
    ok = check_cards(reading("npu_smi_info_910b4_8card_atlas800i_a2_healthy.txt"), HERE)
    assert ok.status is Status.PASS and "8 NPU(s)" in ok.observed and "25.0.rc1.1" in ok.observed
    absent = NpuSmiReading(None, absent="npu-smi not found on PATH")
    assert check_cards(absent, NOWHERE).status is Status.SKIP
    missing_on_npu_host = check_cards(absent, HERE)
    assert missing_on_npu_host.status is Status.FAIL and "PATH" in missing_on_npu_host.fix


@pytest.mark.parametrize(
    "name, code",
    [
        ("npu_smi_error_dcmi_init_failed_-8005.txt", "HwHiAiUser"),
        ("npu_smi_error_device_in_use_-8020.txt", "another container"),
    ],
)
def test_cards_fail_on_dcmi_errors_with_specific_fix(name, code):
    result = check_cards(NpuSmiReading("npu-smi", error=fixture_text(name)), HERE)
    assert result.status is Status.FAIL and code in result.fix


def test_health():
    assert check_health(reading("npu_smi_info_910b4_8card_atlas800i_a2_healthy.txt")).status is Status.PASS
    bad = check_health(reading("npu_smi_info_310b4_health_alarm.txt"))
    assert bad.status is Status.FAIL and "NPU 0 chip 0 (310B4): Alarm" in bad.observed


def test_memory_in_use_against_gpu_memory_utilization():
    idle = check_memory(reading("npu_smi_info_910b4_8card_atlas800i_a2_healthy.txt"), 0.85)
    assert idle.status is Status.PASS  # 2654 of 32768 MB = 8% < 15%
    busy = check_memory(reading("npu_smi_info_910b2c_2card_with_process.txt"), 0.85)
    assert busy.status is Status.WARN  # 20701 of 65536 MB = 32% > 15%
    assert (
        "pid 124528 python3.8" in busy.observed and "--gpu-memory-utilization to 0.63" in busy.fix
    )  # 0.95 - 20701/65536
    assert check_memory(reading("npu_smi_info_910b2c_2card_with_process.txt"), 0.6).status is Status.PASS


def test_read_runs_fake_npu_smi_on_path(tmp_path):
    install_fake_npu_smi(
        tmp_path / "bin",
        "npu_smi_info_910b4_8card_atlas800i_a2_healthy.txt",
        board=fixture_text("npu_smi_info_t_board_i0_910b.txt"),
    )
    ctx = make_ctx(tmp_path, {"PATH": str(tmp_path / "bin")})
    got = read_npu_smi(ctx)
    assert got.error is None and got.table is not None and len(got.table.chips) == 8
    assert got.board["Firmware Version"] == "7.8.0.6.201"


def test_read_reports_failing_npu_smi(tmp_path):
    install_fake_npu_smi(tmp_path / "bin", "npu_smi_error_dcmi_init_failed_-8005.txt", exit_code=1)
    got = read_npu_smi(make_ctx(tmp_path, {"PATH": str(tmp_path / "bin")}))
    assert got.table is None and "-8005" in got.error
    assert read_npu_smi(make_ctx(tmp_path, {"PATH": str(tmp_path / "empty")})).absent


# -- the chip families added for issue #31 (tests/fixtures/check/SOURCES.md) ----------------------


@pytest.mark.parametrize(
    ("name", "driver", "chips", "family"),
    [
        ("npu_smi_info_910b1_8card_23.0.rc2.2_busy.txt", "23.0.rc2.2", 8, {"910B1"}),
        ("npu_smi_info_910b3_1card_24.1.rc1_issue834_cut.txt", "24.1.rc1", 1, {"910B3"}),
        ("npu_smi_info_910b4-1_2card_25.2.0_hami_webui47_cut.txt", "25.2.0", 2, {"910B4-1"}),
        ("npu_smi_info_910premiuma_8card_23.0.rc2_processes.txt", "23.0.rc2", 8, {"910PremiumA"}),
        ("npu_smi_info_910prob_24.1.0_issue1047_cut.txt", "24.1.0", 2, {"910ProB"}),
        ("npu_smi_info_910c1_a3_phyid_24.1.rc3.3_issue1696_cut.txt", "24.1.rc3.3", 2, {"910C1"}),
        ("npu_smi_info_ascend910_a3_wide_26.0.rc2_issue12980_cut.txt", "26.0.rc2", 2, {"Ascend910"}),
        ("npu_smi_info_910b2_1card_25.3.rc1_issue5695_cut.txt", "25.3.rc1", 1, {"910B2"}),
    ],
)
def test_every_chip_family_parses_including_pastes_cut_short(name, driver, chips, family):
    t = table(name)
    assert t.driver_version == driver
    assert len(t.chips) == chips, "a chip's two lines before the end of a cut paste still count"
    assert {c.name for c in t.chips} == family
    assert all(c.health == "OK" for c in t.chips)


def test_first_generation_910_reports_ddr_and_hbm_and_the_model_competes_for_hbm():
    premium = table("npu_smi_info_910premiuma_8card_23.0.rc2_processes.txt")
    chip = premium.chips[3]
    assert (chip.memory_used_mb, chip.memory_total_mb) == (2436, 15039)  # the DDR pool
    assert (chip.hbm_used_mb, chip.hbm_total_mb) == (31842, 32768)  # '31842/ 32768': no space before '/'
    assert (chip.device_used_mb, chip.device_total_mb) == (31842, 32768)
    assert [(p.npu_id, p.pid, p.memory_mb) for p in premium.processes][:2] == [(0, 5139, 31913), (1, 5141, 31913)]
    prob = table("npu_smi_info_910prob_24.1.0_issue1047_cut.txt")
    assert [(c.memory_used_mb, c.memory_total_mb, c.hbm_used_mb) for c in prob.chips] == [
        (2387, 13553, 18),
        (1840, 15665, 8),
    ]


def test_a3_phy_id_rows_keep_the_chip_index_and_the_wide_layout_reads_the_same():
    c1 = table("npu_smi_info_910c1_a3_phyid_24.1.rc3.3_issue1696_cut.txt")
    assert [(c.npu_id, c.chip_id, c.power_w, c.hbm_used_mb) for c in c1.chips] == [
        (0, 0, 198.7, 56844),
        (0, 1, None, 56523),
    ]
    wide = table("npu_smi_info_ascend910_a3_wide_26.0.rc2_issue12980_cut.txt")
    assert [(c.chip_id, c.bus_id, c.hbm_used_mb) for c in wide.chips] == [
        (0, "0000:9D:00.0", 3419),
        (1, "0000:9F:00.0", 2874),
    ]


def test_a_busy_910b1_box_is_flagged_by_the_memory_check():
    reading = NpuSmiReading("npu-smi", table=table("npu_smi_info_910b1_8card_23.0.rc2.2_busy.txt"))
    assert check_memory(reading, 0.9).status is Status.WARN
