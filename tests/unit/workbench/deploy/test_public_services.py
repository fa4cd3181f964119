"""The four public deployments in tests/fixtures/deploy (each with its SOURCE): every engine setting of the
hand-made expected list is recovered with its file and line, the release picked is the one the list gives
(with its reasons), and the ported files lint clean at that release."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.unit.workbench.deploy.conftest import DEPLOY, expected, service_paths
from workbench.deploy.api import ImportRequest, run_import
from workbench.deploy.read import read_paths


def _found(name: str) -> dict[str, dict[tuple[str, str | None], set[tuple[str, int]]]]:
    result = read_paths(service_paths(name), {})
    found: dict = {}
    for container in result.containers:
        for setting in container.settings():
            where = str(Path(setting.origin.file).resolve().relative_to((DEPLOY / name).resolve()))
            found.setdefault(container.name, {}).setdefault((setting.key, setting.value), set()).add(
                (where, setting.origin.line)
            )
    return found


def test_every_expected_setting_is_recovered_with_its_file_and_line(service):
    found = _found(service)
    missing = []
    for container, settings in expected(service)["containers"].items():
        for row in settings:
            key = (
                "model"
                if row["setting"] == "flag.--model" and (row["setting"], row["value"]) not in found.get(container, {})
                else row["setting"]
            )
            places = found.get(container, {}).get((key, row["value"]), set())
            if (row["file"], row["line"]) not in places:
                missing.append((container, row, sorted(places)))
    assert missing == []


def test_companions_are_named(service):
    want = expected(service).get("companions", [])
    assert [c.name for c in read_paths(service_paths(service), {}).companions] == want


@pytest.fixture(scope="module")
def imports(tmp_path_factory) -> dict:
    done = {}
    for name in ("lws-vllm", "production-stack", "worker-vllm", "genaicomps-vllm"):
        out = tmp_path_factory.mktemp(name) / "ported"
        done[name] = run_import(ImportRequest(service_paths(name), to_ascend=out))
    return done


def test_the_release_picked_and_why(service, imports):
    want = expected(service)["release"]
    pick = imports[service].pick
    assert pick.release == want["pick"]
    assert pick.service_vllm == (str(want["service_vllm"]) if want["service_vllm"] is not None else None)
    changes = " ".join(c.text for c in pick.changes)
    for needle in want["changes"]:
        assert needle in changes
    reasons = " ".join(r.text for r in pick.reasons)
    for needle in want.get("reasons", []):
        assert needle in reasons
    # a pick holds every engine setting there, unless no release judged does (then it refuses the fewest)
    assert pick.release in pick.holding or not pick.holding


def test_ported_files_lint_clean_at_the_release(service, imports):
    result = imports[service]
    assert result.ported and all(not p.not_applied for p in result.ported)
    assert result.ported_lint and result.clean(), result.ported_lint
    assert all(row["release"] == result.pick.release for row in result.ported_lint)


def test_every_change_is_cited(service, imports):
    for ported in imports[service].ported:
        for change in ported.changes:
            assert change.method.startswith("docs/METHOD.md §"), change
            # a vllm-ascend doc or source line pinned to a tag, lint's TAG:path:line, or the vLLM sdist lint read
            assert (
                change.cite.startswith(("https://github.com/vllm-project/", "pypi:vllm-", "workbench/truth/data/"))
                or "@" in change.cite
                or re.match(r"(v[\w.]+|main):vllm_ascend/\S+:\d+$", change.cite)
            ), change


def test_recipes_are_valid_serving_recipes_traced_to_their_lines(service, imports):
    from workbench.recipes.reader import validate_recipe
    from workbench.recipes.serving import ServingRecipe

    recipes = imports[service].recipes
    assert recipes
    for recipe in recipes:
        loaded = validate_recipe(ServingRecipe, recipe.data, recipe.name)
        assert loaded.device.value == "npu"
        assert all(":" in row["from"] for row in recipe.trace)
