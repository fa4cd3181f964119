"""CANN toolkit location, version files, set_env.sh sourced, NNAL/ATB — on fake /usr/local/Ascend trees."""

from __future__ import annotations

from tests.unit.workbench.check.fakes import build_ascend_tree, fixture_text, make_ctx
from workbench.check.cann import check_cann, check_nnal, check_sourced, check_toolkit, check_version
from workbench.check.result import Status
from workbench.stack.cann import find_cann
from workbench.stack.infofiles import ascend_version_key, in_range, parse_key_values, parse_version_cfg
from workbench.stack.presence import NpuPresence

HERE = NpuPresence(True, "test machine")
NOWHERE = NpuPresence(False, "no Ascend NPU here")


def test_info_file_parsers_on_real_files():
    assert parse_key_values(fixture_text("cann_8.2.RC1_ascend_toolkit_install.info"))["version"] == "8.2.RC1"
    runtime = parse_key_values(fixture_text("cann_8.1.RC1_runtime_version.info"))
    assert runtime["version_dir"] == "8.1.RC1" and runtime["required_opp_abi_version"] == ">=6.3, <=7.7"
    atb = parse_key_values(fixture_text("nnal_atb_8.1.RC1_version.info"))  # leading spaces, ' : '
    assert atb["Ascend-cann-atb"] == "8.1.RC1" and atb["Ascend-cann-atb Version"] == "8.1.RC1.B150"
    cfg = parse_version_cfg(fixture_text("cann_8.1.RC1_latest_version.cfg"))
    assert cfg["toolkit_running_version"] == ("7.7.0.1.238", "8.1.RC1")


def test_ascend_version_ordering():
    assert ascend_version_key("24.1.rc2.2") < ascend_version_key("24.1.0") < ascend_version_key("25.0.rc1.1")
    assert ascend_version_key("25.0.rc1") < ascend_version_key("25.0.rc1.1") < ascend_version_key("25.0.rc2")
    assert ascend_version_key("23.0.7") < ascend_version_key("24.1.rc2.2")
    assert in_range("7.7.0.1.231", ("7.0.0", "7.7.99")) and not in_range("7.8.0.6.201", ("7.0.0", "7.7.99"))


def test_sourced_8_2_install_passes_everything(tmp_path):
    tree = build_ascend_tree(tmp_path / "Ascend")
    ctx = make_ctx(tmp_path, tree.sourced_env())
    cann = find_cann(ctx)
    assert cann.toolkit == tree.toolkit and cann.found_via == "$ASCEND_HOME_PATH"
    assert cann.version == "8.2.RC1" and cann.version_source.name == "ascend_toolkit_install.info"
    results = check_cann(cann, HERE, ctx)
    assert [r.status for r in results] == [Status.PASS] * 4, results


def test_default_location_found_without_env_but_not_sourced(tmp_path):
    tree = build_ascend_tree(tmp_path / "Ascend")
    ctx = make_ctx(tmp_path, {"PATH": "/usr/bin"})
    cann = find_cann(ctx)
    assert cann.toolkit == tree.toolkit and cann.found_via == "default location"
    sourced = check_sourced(cann, ctx)
    assert sourced.status is Status.FAIL
    assert "ASCEND_HOME_PATH/ASCEND_TOOLKIT_HOME unset" in sourced.observed
    assert f"source {tree.root / 'ascend-toolkit' / 'set_env.sh'}" in sourced.fix and "libascendcl.so" in sourced.fix


def test_env_set_but_library_path_missing_fails(tmp_path):
    tree = build_ascend_tree(tmp_path / "Ascend")
    ctx = make_ctx(tmp_path, tree.sourced_env(LD_LIBRARY_PATH="/nowhere"))
    result = check_sourced(find_cann(ctx), ctx)
    assert result.status is Status.FAIL and "no libascendcl.so on LD_LIBRARY_PATH" in result.observed


def test_version_from_version_cfg_and_components(tmp_path):
    tree = build_ascend_tree(tmp_path / "Ascend", cann="8.1.RC1", atb="nnal_atb_8.1.RC1_version.info")
    (tree.toolkit / "aarch64-linux" / "ascend_toolkit_install.info").unlink()
    cann = find_cann(make_ctx(tmp_path, tree.sourced_env()))
    assert cann.version == "8.1.RC1" and cann.version_source.name == "version.cfg"
    assert dict(cann.component_versions) == {"compiler": "8.1.RC1", "runtime": "8.1.RC1"}
    assert check_version(cann).status is Status.PASS


def test_mixed_component_releases_fail(tmp_path):
    tree = build_ascend_tree(tmp_path / "Ascend")  # 8.2.RC1 toolkit ...
    (tree.toolkit / "runtime").mkdir()
    (tree.toolkit / "runtime" / "version.info").write_text(fixture_text("cann_8.1.RC1_runtime_version.info"))
    result = check_version(find_cann(make_ctx(tmp_path, tree.sourced_env())))
    assert (
        result.status is Status.FAIL and "runtime 8.1.RC1" in result.observed and "toolkit 8.2.RC1" in result.observed
    )


def test_no_toolkit_skips_without_npu_and_fails_with(tmp_path):
    ctx = make_ctx(tmp_path, {"PATH": "/usr/bin"})
    cann = find_cann(ctx)
    assert cann.toolkit is None
    assert check_toolkit(cann, NOWHERE, ctx).status is Status.SKIP
    assert check_toolkit(cann, HERE, ctx).status is Status.FAIL
    assert {r.status for r in check_cann(cann, NOWHERE, ctx)} == {Status.SKIP}


def test_stale_ascend_home_path_fails(tmp_path):
    build_ascend_tree(tmp_path / "Ascend")
    ctx = make_ctx(tmp_path, {"PATH": "/usr/bin", "ASCEND_HOME_PATH": str(tmp_path / "old" / "8.0.RC3")})
    result = check_toolkit(find_cann(ctx), HERE, ctx)
    assert result.status is Status.FAIL and "does not exist" in result.observed


def test_nnal_mismatch_unsourced_and_missing(tmp_path):
    tree = build_ascend_tree(tmp_path / "Ascend", atb="nnal_atb_8.1.RC1_version.info")
    ctx = make_ctx(tmp_path, tree.sourced_env())
    mismatch = check_nnal(find_cann(ctx), HERE, ctx)
    assert mismatch.status is Status.FAIL and "ATB 8.1.RC1" in mismatch.observed and "NNAL 8.2.RC1" in mismatch.fix

    tree2 = build_ascend_tree(tmp_path / "A2")
    env = tree2.sourced_env()
    del env["ATB_HOME_PATH"]
    ctx2 = make_ctx(tmp_path, env, ascend_root=tree2.root)
    assert check_nnal(find_cann(ctx2), HERE, ctx2).status is Status.WARN

    tree3 = build_ascend_tree(tmp_path / "A3", atb=None)
    ctx3 = make_ctx(tmp_path, tree3.sourced_env(), ascend_root=tree3.root)
    assert check_nnal(find_cann(ctx3), HERE, ctx3).status is Status.FAIL
    assert check_nnal(find_cann(ctx3), NOWHERE, ctx3).status is Status.SKIP
