"""The checkpoint linter against its corpus: 21 tiny checkpoints, each with its verdict per vllm-ascend tag."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REPO_ROOT
from workbench.errors import WorkbenchError
from workbench.lint.checkpoint import capability_table, lint_checkpoint, resolve_release, verdicts
from workbench.truth.table import config_table

MIRROR = Path("/work/.mirror/vllm-project+vllm-ascend/repo")
CITE = re.compile(r"^vllm_ascend/[\w/]+\.py@(v[\w.]+|main):\d+$")
TAGS = config_table().tags


def _corpus_module():
    spec = importlib.util.spec_from_file_location("quant_lint_build", FIXTURES / "quant_lint" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CORPUS = _corpus_module()
CASES = sorted(CORPUS.expected())


@pytest.fixture(scope="module")
def corpus(tiny_cache, tmp_path_factory):
    return CORPUS.build(tmp_path_factory.mktemp("quant-lint"), tiny_cache / "models" / "tiny")


def test_the_corpus_covers_fifteen_cases_or_more_and_every_tag():
    assert len(CASES) >= 15
    tags = capability_table()["tags"]
    assert all(set(CORPUS.expected()[case]["verdicts"]) == set(tags) for case in CASES)


@pytest.mark.parametrize("case", CASES)
def test_each_case_gets_its_expected_verdict_per_tag(corpus, case):
    findings = lint_checkpoint(corpus[case])
    assert verdicts(findings) == CORPUS.expected()[case]["verdicts"], [f.to_dict() for f in findings]
    for finding in findings:
        assert CITE.match(finding.cite), finding.cite
        # the loader's line at the release judged; a verdict from the table the command lint shares cites
        # the first tag of the span it holds over (the same line through the release)
        cited = finding.cite.split("@")[1].split(":")[0]
        assert cited == finding.release or TAGS.index(cited) < TAGS.index(finding.release), finding.cite
        assert finding.setting and finding.reason and finding.fix


def test_a_genuine_msmodelslim_v1_description_lints_clean():
    assert lint_checkpoint(FIXTURES / "msmodelslim_v1" / "quant_model_description.json") == []


def test_a_finding_names_file_key_tag_line_and_fix(corpus):
    (finding,) = lint_checkpoint(corpus["ms_lm_head_missing"], release="0.18.0")
    assert finding.setting == "quant_model_description.json:lm_head.weight" and finding.value == "absent"
    assert finding.cite == "vllm_ascend/quantization/modelslim_config.py@v0.18.0:506"
    assert '"lm_head.weight": "FLOAT"' in finding.fix and "KeyError" in finding.reason
    (bad,) = lint_checkpoint(corpus["ms_nan_scale"], release="main")
    assert bad.setting.endswith(":model.layers.1.mlp.down_proj.weight_scale") and "NaN" in bad.value


def test_invalid_json_is_one_finding_with_its_line_never_a_traceback(corpus):
    (finding,) = lint_checkpoint(corpus["ms_trailing_comma"], release="v0.23.0")
    assert finding.finding == "description_not_json" and re.search(r"line \d+ column \d+", finding.value)
    assert "trailing comma" in finding.value


@pytest.mark.parametrize(
    "release,tag",
    [("v0.18.0", "v0.18.0"), ("0.18.0", "v0.18.0"), ("0.15.0rc1", "v0.13.0"), ("0.30.0", "main"),
     ("main", "main")],
)  # fmt: skip
def test_a_release_is_judged_by_the_newest_tag_at_or_before_it(release, tag):
    assert [t for t, _ in resolve_release(release)] == [tag]


@pytest.mark.parametrize(
    "release,message", [("0.1.0", "older than the first tag"), ("banana", "give a vllm-ascend version")]
)
def test_a_bad_release_is_one_clear_error(release, message):
    with pytest.raises(WorkbenchError, match=message):
        resolve_release(release)


def test_a_path_that_is_not_a_quantized_checkpoint_is_one_clear_error(tiny_dir, tmp_path):
    with pytest.raises(WorkbenchError, match="no such file or directory"):
        lint_checkpoint(tmp_path / "nothing")
    with pytest.raises(WorkbenchError, match="not a quantized checkpoint"):
        lint_checkpoint(tiny_dir)


@pytest.mark.skipif(not MIRROR.is_dir(), reason="needs the vllm-ascend mirror")
def test_the_capability_table_matches_the_mirror():
    """Every cell's line is re-read from vllm-ascend's source at its tag (scripts/quant_capabilities.py)."""
    spec = importlib.util.spec_from_file_location("quant_capabilities", REPO_ROOT / "scripts" / "quant_capabilities.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.build(MIRROR) == json.loads(module.OUT.read_text())


def test_the_lint_verb_takes_a_checkpoint(corpus, capsys):
    from workbench import cli

    assert cli.main(["lint", "--checkpoint", str(corpus["ms_w8a16"]), "--release", "v0.11.0", "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["kind"] == "lint" and document["release"] == "v0.11.0"
    assert {r["finding"] for r in document["findings"]} == {"linear_type_unsupported"}
    assert all(r["release"] == "v0.11.0" and r["release_basis"] for r in document["findings"])
    assert cli.main(["lint", "--checkpoint", str(corpus["ms_w8a16"]), "--release", "0.13.0"]) == 0
    assert "no findings" in capsys.readouterr().out
    assert cli.main(["lint", "--checkpoint", str(corpus["ms_lm_head_missing"])]) == 1
    assert "v0.23.0 pass" in capsys.readouterr().out  # every tag, with its verdict
    assert cli.main(["lint", "serve.sh", "--checkpoint", str(corpus["ms_w8a16"])]) != 0
    assert "not both" in capsys.readouterr().err
