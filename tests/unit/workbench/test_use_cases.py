"""A verb and its notebook call the same typed use case (docs/ARCHITECTURE.md: one use case per task).

The verb translates flags into the request and prints the result; the notebook builds the same request from
its parameters. Checked from the code itself: the verb's module and the notebook's code cells must both call
the use-case function, and the function must take the typed request as its first parameter.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import typing

import pytest

from tests.conftest import REPO_ROOT

# (verb module, notebook, api module, use-case function, request type)
USE_CASES = [
    ("bisect", "06_bisect.ipynb", "workbench.bisect.api", "run_bisect", "BisectRequest"),
    ("compare_ops", "04_compare_ops.ipynb", "workbench.accuracy.api", "run_compare_ops", "CompareOpsRequest"),
    ("import_", "00_import.ipynb", "workbench.deploy.api", "run_import", "ImportRequest"),
    ("replay", "12_replay.ipynb", "workbench.replay.api", "run_replay", "ReplayRequest"),
    ("twin", "11_twin.ipynb", "workbench.twin.api", "run_twin", "TwinRequest"),
    ("twin", "08_profile.ipynb", "workbench.twin.api", "run_perf_twin", "PerfTwinRequest"),
]


def _called_names(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return names


def _notebook_tree(name: str) -> ast.Module:
    cells = json.loads((REPO_ROOT / "notebooks" / name).read_text(encoding="utf-8"))["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    return ast.parse(code)


@pytest.mark.parametrize(("verb", "notebook", "api", "function", "request_type"), USE_CASES)
def test_the_verb_and_the_notebook_call_the_same_use_case(verb, notebook, api, function, request_type):
    verb_tree = ast.parse((REPO_ROOT / "workbench" / "verbs" / f"{verb}.py").read_text(encoding="utf-8"))
    assert function in _called_names(verb_tree), f"`ascend-workbench {verb}` does not call {api}.{function}"
    assert function in _called_names(_notebook_tree(notebook)), f"notebook {notebook} does not call {function}"
    module = importlib.import_module(api)
    first = next(iter(inspect.signature(getattr(module, function)).parameters.values()))
    hints = typing.get_type_hints(getattr(module, function))
    assert hints[first.name] is getattr(module, request_type), f"{function}'s first parameter is not a {request_type}"
