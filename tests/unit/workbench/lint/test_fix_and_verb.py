"""`lint --fix` writes a migrated copy that lints clean at the target release; the verb's exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from workbench.cli import main
from workbench.lint.api import lint_source, lint_upgrade, write_fix
from workbench.lint.release import resolve_target

SCRIPT = """#!/bin/bash
# serve the big one
export VLLM_USE_V1=1
export VLLM_ASCEND_ENABLE_MLAPO=true   # keep this comment
vllm serve /models/DeepSeek-V3 --tensor-parallel-size 16 \\
  --additional-config '{"expert_map_path": "/m.json", "init_redundancy_expert": 16, "torchair_graph_config": {"enabled": true}}'
"""


def test_the_fix_migrates_a_script_in_place_and_keeps_everything_else(tmp_path):
    source = tmp_path / "serve.sh"
    source.write_text(SCRIPT)
    report = lint_source(source, release="main")
    out = tmp_path / "serve.main.sh"
    diff = write_fix(report, out)
    fixed = out.read_text()
    assert source.read_text() == SCRIPT  # never in place
    assert "# serve the big one" in fixed and "# keep this comment" in fixed
    assert "VLLM_USE_V1" not in fixed and "VLLM_ASCEND_ENABLE_MLAPO=1" in fixed
    config = json.loads(fixed.split("--additional-config '")[1].split("'")[0])
    assert config == {"eplb_config": {"expert_map_path": "/m.json", "num_redundant_experts": 16}}
    assert diff.startswith("---") and "+export VLLM_ASCEND_ENABLE_MLAPO=1" in diff
    again = lint_source(out, release="main")
    assert again.errors == [], [f.reason for f in again.errors]


def test_the_fix_of_a_recipe_moves_values_inside_the_recipe(tmp_path):
    recipe = tmp_path / "npu.yaml"
    recipe.write_text(
        yaml.safe_dump(
            {
                "name": "npu",
                "device": "npu",
                "model": "/models/q",
                "engine": {
                    "additional_config": {"torchair_graph_config": {"enabled": True}, "enable_cpu_binding": True}
                },
                "env": {"VLLM_ASCEND_ENABLE_NZ": "2"},
            }
        )
    )
    report = lint_source(recipe, release="v0.22.1rc1")
    write_fix(report, tmp_path / "fixed.yaml")
    data = yaml.safe_load((tmp_path / "fixed.yaml").read_text())
    assert data["engine"]["additional_config"] == {"enable_cpu_binding": True, "weight_nz_mode": 2}
    assert "env" not in data


def test_fix_refuses_to_overwrite_its_input(tmp_path):
    source = tmp_path / "serve.sh"
    source.write_text(SCRIPT)
    with pytest.raises(Exception, match="the input itself"):
        write_fix(lint_source(source, release="main"), source)


def test_upgrade_lists_what_changes():
    changes = lint_upgrade(SCRIPT, "v0.13.0", "main").changes()
    moved = {row["setting"]: (row["at v0.13.0"], row["at main"]) for row in changes}
    assert moved["additional_config.expert_map_path"] == ("ok", "renamed")


def test_release_basis_names_where_the_release_came_from():
    from workbench.truth.table import config_table

    table = config_table()
    assert resolve_target(table, "v0.12.5").tag == "v0.12.0rc1"
    assert "newest older tag" in resolve_target(table, "v0.12.5").basis
    guessed = resolve_target(table, None)  # nothing installed here
    assert guessed.tag == "main" and "--release" in guessed.basis
    inferred = resolve_target(table, None, {"versions": {"torch-npu": "2.10.0.post2"}}, "lock.yaml")
    assert "ambiguous" in inferred.basis and "--release" in inferred.basis


def test_the_verb_exit_codes_and_the_typed_document(tmp_path, capsys):
    clean = tmp_path / "ok.sh"
    clean.write_text("export HCCL_BUFFSIZE=512\nvllm serve m --max-num-seqs 8\n")
    assert main(["lint", str(clean), "--release", "v0.13.0"]) == 0
    bad = tmp_path / "bad.sh"
    bad.write_text(SCRIPT)
    capsys.readouterr()
    assert main(["lint", str(bad), "--release", "v0.13.0", "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["kind"] == "lint" and document["schema_version"] == 1 and document["provenance"]
    records = document["findings"]
    assert set(records[0]) >= {
        "setting",
        "value",
        "release",
        "release_basis",
        "finding",
        "severity",
        "reason",
        "fix",
        "cite",
    }
    broken = tmp_path / "broken.sh"
    broken.write_text("vllm serve m --additional-config '{\"a\": 1,}'\n")
    assert main(["lint", str(broken), "--release", "v0.13.0"]) == 2
    assert "not JSON" in capsys.readouterr().err
    assert main(["lint", str(tmp_path / "missing.sh")]) == 2


def test_standard_input_is_read_once_for_the_upgrade_and_the_fix(tmp_path, monkeypatch, capsys):
    """`lint - --to TAG --fix OUT` used to read standard input twice: the upgrade saw nothing (0 changes)
    and --fix wrote an empty file. One read feeds every view of the input now."""
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(SCRIPT))
    out = tmp_path / "fixed.sh"
    assert main(["lint", "-", "--release", "v0.13.0", "--to", "main", "--fix", str(out)]) == 1
    printed = capsys.readouterr().out
    changes = int(printed.split("upgrade v0.13.0 -> main: ")[1].split(" ")[0])
    assert changes > 0
    assert out.read_text().strip() and "vllm serve" in out.read_text()


def test_run_lint_takes_standard_input_from_the_caller(tmp_path):
    import io

    from workbench.lint.api import LintRequest, run_lint

    result = run_lint(LintRequest(source="-", release="v0.13.0", to="main"), stdin=io.StringIO(SCRIPT))
    assert result.report.parsed.where == "stdin" and result.upgrade.changes()
    assert result.to_dict()["upgrade"]["changes"] == result.upgrade.changes()
    written = result.write(tmp_path / "lint.json")
    from workbench.lint.api import LINT_KIND

    assert LINT_KIND.read(written)["findings"] == result.report.records()


def test_a_request_names_the_flag_it_refuses():
    from workbench.errors import WorkbenchError
    from workbench.lint.api import LintRequest

    with pytest.raises(WorkbenchError, match="--release 'v9.x'"):
        LintRequest(source="serve.sh", release="v9.x")
    with pytest.raises(WorkbenchError, match="not both"):
        LintRequest()
    with pytest.raises(WorkbenchError, match="never in place"):
        LintRequest(source="serve.sh", fix=Path("serve.sh"))
