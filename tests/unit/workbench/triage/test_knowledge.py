"""The error-code knowledge base: the shipped file is complete and consistent, a broken one is one clear
error naming the file and the entry, and a code without an entry still reads as something."""

from __future__ import annotations

import re
import shutil

import pytest
import yaml

from tests.conftest import REPO_ROOT
from workbench.errors import WorkbenchError
from workbench.triage.codes import CodeKind, ErrorCode, describe
from workbench.triage.kinds import FailureKind
from workbench.triage.knowledge import VerifyStep, default_path, load_knowledge_base

# The codes issue #31 names, by family of code.
ISSUE_CODES = ["107001", "107030", "207005", "207008", "507015", "507035", "507053", "507899", "EZ9999", "EE1001",
               "EI0002", "EJ0001", "EL0009", "ERR00100", "ERR01100", "ERR01007", "ERR99999"]  # fmt: skip


@pytest.fixture(scope="module")
def kb():
    return load_knowledge_base()


def test_the_shipped_file_loads_and_lives_under_policy(kb):
    assert default_path() == REPO_ROOT / "policy" / "triage" / "error_codes.yaml"
    assert kb.source == default_path()
    assert set(ISSUE_CODES) <= set(kb.codes)


def test_every_family_a_code_or_signature_names_has_advice_with_ranked_causes(kb):
    named = {e.family for e in kb.codes.values()} | {s.family for s in kb.signatures}
    assert named <= set(kb.families)
    for kind, advice in kb.families.items():
        assert len(advice.causes) >= 1 and advice.fix and advice.cite, kind
    # The kinds the codes brought are all used: a family nobody reaches is dead data.
    code_families = {
        k for k in FailureKind if list(FailureKind).index(k) >= list(FailureKind).index(FailureKind.DEVICE_INIT)
    }
    reached = named | {FailureKind.OOM_WEIGHTS, FailureKind.OOM_GRAPH_CAPTURE}  # by stage signatures
    assert code_families <= reached


def test_verify_steps_name_things_the_workbench_has(kb):
    from workbench.accuracy.opsuite import load_cases
    from workbench.bisect.plan import features_dir, load_plan
    from workbench.check.result import Group
    from workbench.recipes import EngineArgs, ServingRecipe

    ops = {case.op for case in load_cases()}
    features = {f.name for f in load_plan(features_dir() / "ascend.yaml").features}
    groups = {g.value for g in Group}
    verifies = [f.verify for f in kb.families.values()] + [e.verify for e in kb.codes.values() if e.verify]
    for verify in verifies:
        if verify.target is None:
            continue
        if verify.step is VerifyStep.COMPARE_OPS:
            assert verify.target in ops
        elif verify.step is VerifyStep.BISECT:
            assert verify.target in features
        elif verify.step is VerifyStep.CHECK:
            assert verify.target in groups
        elif verify.step is VerifyStep.RECIPE:
            top, _, key = verify.target.partition(".")
            assert top in ServingRecipe.model_fields, verify.target
            assert not key or top != "engine" or key in EngineArgs.model_fields, verify.target
    assert {o.op for o in kb.operators} <= ops


def test_method_sections_cited_exist_in_the_method(kb):
    method = (REPO_ROOT / "docs" / "METHOD.md").read_text(encoding="utf-8")
    sections = {int(n) for n in re.findall(r"^## (\d+)\.", method, re.MULTILINE)}
    assert {n for f in kb.families.values() for n in f.method} <= sections


def test_citations_resolve_to_pinned_addresses(kb):
    for advice in kb.families.values():
        for url in kb.cited(advice.cite):
            assert url.startswith("https://")
            assert "/blob/main/" not in url and "/blob/master/" not in url


def _broken(tmp_path, change) -> str:
    data = yaml.safe_load(default_path().read_text(encoding="utf-8"))
    change(data)
    path = tmp_path / "error_codes.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    with pytest.raises(WorkbenchError) as raised:
        load_knowledge_base(path)
    message = str(raised.value)
    assert str(path) in message and "\n" not in message
    return message


def test_a_malformed_entry_is_one_error_naming_the_file_and_the_entry(tmp_path):
    message = _broken(tmp_path, lambda d: d["codes"]["507015"].update(family="operator_exec"))
    assert "codes.507015.family" in message and "operator_execution" in message
    message = _broken(tmp_path, lambda d: d["codes"].update({"5070150": d["codes"]["507015"]}))
    assert "'5070150' is not a code" in message
    message = _broken(tmp_path, lambda d: d["signatures"][0].update(pattern="(unclosed"))
    assert "signatures[0].pattern" in message and "not a regular expression" in message
    message = _broken(tmp_path, lambda d: d["signatures"][0].update(pattern=r"out of\s+memory"))
    assert "signatures[0].pattern" in message and "one line at a time" in message
    message = _broken(tmp_path, lambda d: d["codes"]["EZ9999"].update(cite=["no_such_reference"]))
    assert "codes.EZ9999" in message and "no_such_reference" in message


def test_a_citation_to_a_moving_branch_or_a_missing_file_is_refused(tmp_path):
    blob = "https://github.com/vllm-project/vllm-ascend/blob/main/docs/source/faqs.md"
    message = _broken(tmp_path, lambda d: d["references"].update(vllm_ascend_faq=blob))
    assert "tag or commit" in message
    with pytest.raises(WorkbenchError, match="not found"):
        load_knowledge_base(tmp_path / "missing.yaml")


def test_a_copied_file_loads_the_same(tmp_path):
    copy = tmp_path / "codes.yaml"
    shutil.copy(default_path(), copy)
    assert load_knowledge_base(copy).codes.keys() == load_knowledge_base().codes.keys()


@pytest.mark.parametrize(
    ("code", "says"),
    [
        (ErrorCode(CodeKind.ACL, "507999"), ["CANN runtime", "internal"]),
        (ErrorCode(CodeKind.ACL, "161999"), ["aclnn", "caller can fix"]),
        (ErrorCode(CodeKind.MESSAGE, "E69999"), ["not in CANN's list", "internal error"]),
        (ErrorCode(CodeKind.MESSAGE, "EI0015"), ["HCCL", "user error"]),
        (ErrorCode(CodeKind.TORCH_NPU, "ERR03005"), ["GRAPH", "internal error"]),
        (ErrorCode(CodeKind.HCCL, "11"), ["HCCL_E_TCP_CONNECT"]),
    ],
)
def test_a_code_without_an_entry_is_described_by_its_own_digits(kb, code, says):
    text = describe(code, kb.grammar)
    assert code.value in text
    assert all(word in text for word in says), text
