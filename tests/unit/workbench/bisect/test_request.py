"""The bisect's typed request: checked once, the default folder and the narrowed plan derived in one place."""

from __future__ import annotations

import pytest

from tests.conftest import REPO_ROOT
from workbench.bisect.api import BisectRequest
from workbench.bisect.runner import default_out_dir
from workbench.errors import WorkbenchError

RECIPE = REPO_ROOT / "recipes" / "serving" / "cpu-tiny.yaml"


def test_a_request_narrows_the_plan_and_names_its_default_folder():
    request = BisectRequest.load(RECIPE, only=("ascend_backend_plugin",))
    assert request.plan.target == "cpu" and len(request.plan.order) > 1  # the recipe device's plan
    assert request.chosen.order == ("ascend_backend_plugin",)
    assert request.out_dir == default_out_dir(request.recipe, request.chosen)
    # another subset is another plan, so another folder: old steps are never mixed in
    wider = BisectRequest(request.recipe, request.plan, only=request.plan.order[:2])
    assert wider.out_dir != request.out_dir


def test_bad_requests_name_the_field_and_the_fix(tmp_path):
    with pytest.raises(WorkbenchError, match=r"feature\(s\) \['no_such_feature'\] are not in plan"):
        BisectRequest.load(RECIPE, only=("no_such_feature",))
    with pytest.raises(WorkbenchError, match="--startup-timeout 0: give a positive number of seconds"):
        BisectRequest.load(RECIPE, startup_timeout_s=0)
    assert BisectRequest.load(RECIPE, out=tmp_path / "x").out_dir == tmp_path / "x"
