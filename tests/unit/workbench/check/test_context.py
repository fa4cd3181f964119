"""Where the checks look: the Ascend root (argument > env var > default), matrices, NPU presence."""

from __future__ import annotations

from pathlib import Path

from tests.unit.workbench.check.fakes import build_ascend_tree, install_fake_npu_smi, make_ctx
from workbench.check.context import CheckContext, default_matrix_files
from workbench.stack.context import DEFAULT_ASCEND_ROOT
from workbench.stack.presence import detect_presence


def test_ascend_root_precedence(tmp_path):
    assert CheckContext.from_environment({}).ascend_root == DEFAULT_ASCEND_ROOT
    env = {"ASCEND_WORKBENCH_ASCEND_ROOT": str(tmp_path / "env-root")}
    assert CheckContext.from_environment(env).ascend_root == tmp_path / "env-root"
    assert CheckContext.from_environment(env, ascend_root=tmp_path / "arg").ascend_root == tmp_path / "arg"


def test_environment_is_a_snapshot_and_paths_are_normalised(tmp_path):
    env = {"PATH": "/usr/bin"}
    ctx = CheckContext.from_environment(
        env, source_checkouts=["~/src/vllm-ascend"], matrix_files=[str(tmp_path / "m.yaml")]
    )
    env["PATH"] = "/changed"
    assert ctx.environ["PATH"] == "/usr/bin"
    assert ctx.source_checkouts == (Path("~/src/vllm-ascend").expanduser(),)
    assert ctx.matrix_files == (tmp_path / "m.yaml",)
    assert {p.name for p in default_matrix_files()} >= {"vllm-ascend.yaml", "cpu-embedded.yaml"}


def test_presence_signs(tmp_path):
    assert not detect_presence(make_ctx(tmp_path, {"PATH": str(tmp_path / "bin")})).present
    install_fake_npu_smi(tmp_path / "bin", "npu_smi_info_910b4_8card_atlas800i_a2_healthy.txt")
    found = detect_presence(make_ctx(tmp_path, {"PATH": str(tmp_path / "bin")}))
    assert found.present and "npu-smi at" in found.evidence
    tree = build_ascend_tree(tmp_path / "Ascend", cann=None, firmware=None, atb=None)
    by_driver = detect_presence(make_ctx(tmp_path, {"PATH": "/nowhere"}, ascend_root=tree.root))
    assert by_driver.present and "driver installed" in by_driver.evidence
