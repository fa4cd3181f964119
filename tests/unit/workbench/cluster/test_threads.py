"""Real multi-node launch sets from vllm-ascend threads and docs (tests/fixtures/cluster/threads/): the check
finds each thread's fix, and raises no error on the documented consistent sets."""

from __future__ import annotations

import pytest

from tests.unit.workbench.cluster.threads import load_thread, thread_files
from workbench.cluster.check import check_bundles


@pytest.mark.parametrize("path", thread_files(), ids=lambda p: p.stem)
def test_thread(path):
    data, bundles = load_thread(path)
    result = check_bundles(bundles)
    found = {(f.rule, f.setting) for f in result.findings}
    for expected in data.get("expect", []):
        assert (expected["rule"], expected["setting"]) in found, result.text()
        if "node" in expected:
            assert any(expected["node"] in f.node for f in result.findings if f.setting == expected["setting"])
    none = data.get("expect_none")
    if none is True:
        assert not [f for f in result.findings if f.severity.value == "error"], result.text()
    elif none:
        assert not [f for f in result.findings if f.rule in none], result.text()


def test_every_thread_cites_its_source():
    for path in thread_files():
        data, _ = load_thread(path)
        assert data["thread"] and data["summary"] and "fix" in data, path
        assert data.get("expect") or data.get("expect_none"), f"{path} expects nothing"
