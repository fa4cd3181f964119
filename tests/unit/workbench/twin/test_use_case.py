"""The verb and the notebooks call the same twin use cases with the same request (issue 50: one typed use case).

The use case is replaced by a recorder that stops at the first call; the notebook's code cells run in order
(its parameters first) until then, and the verb runs with the flags a shell user would give for the same
twin. Both must hand `workbench.twin.api` equal requests: nothing about the run is decided at the edges.
"""

from __future__ import annotations

import ast
import json

import pytest

from tests.conftest import REPO_ROOT
from workbench import cli
from workbench.serving import server as server_module
from workbench.twin import api


class Called(Exception):
    """Raised by the recorder: the first call of the use case was made."""


def record(monkeypatch, name: str) -> list:
    calls: list = []

    def recorder(request, **kwargs):
        calls.append(request)
        raise Called

    monkeypatch.setattr(api, name, recorder)
    return calls


def _imports_only(source: str) -> bool:
    return all(isinstance(node, ast.Import | ast.ImportFrom) for node in ast.parse(source).body)


def run_notebook_until_the_call(notebook: str, section: str | None) -> None:
    """The parameters cell, the import cells, then (from the markdown cell that opens with the `section` heading,
    or from the start) every code cell in order, until the recorder stops it."""
    cells = json.loads((REPO_ROOT / "notebooks" / notebook).read_text())["cells"]
    namespace: dict = {}
    started = section is None
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            started = started or source.startswith(section or "")
            continue
        if started or "parameters" in cell["metadata"].get("tags", []) or _imports_only(source):
            exec(source, namespace)  # noqa: S102 - the notebook's own cells, in order


def no_servers(monkeypatch) -> None:
    """A cell that would start (or lease) a server fails the test instead: the unit tier starts none."""

    def refuse(*args, **kwargs):
        raise AssertionError("the notebook started a server before reaching the use case")

    monkeypatch.setattr(server_module, "start", refuse)
    monkeypatch.setattr(server_module, "lease", refuse)


def notebook_request(monkeypatch, notebook: str, name: str, section: str | None = None):
    no_servers(monkeypatch)
    calls = record(monkeypatch, name)
    with pytest.raises(Called):
        run_notebook_until_the_call(notebook, section)
    return calls[0]


def verb_request(monkeypatch, name: str, argv: list[str]):
    calls = record(monkeypatch, name)
    with pytest.raises(Called):
        cli.main(argv)
    return calls[0]


def same(request_a, request_b) -> None:
    assert type(request_a) is type(request_b)
    for field in request_a.__dataclass_fields__:
        left, right = getattr(request_a, field), getattr(request_b, field)
        if field.startswith("side_"):
            assert (left.identity(), left.changes, left.url, left.trace) == (
                right.identity(),
                right.changes,
                right.url,
                right.trace,
            ), field
        else:
            assert left == right, field


def test_notebook_11_and_the_verb_make_the_same_token_twin_request(monkeypatch):
    from_notebook = notebook_request(monkeypatch, "11_twin.ipynb", "run_twin")
    argv = "twin --recipe cpu-tiny --set B:engine.tensor_parallel_size=2 --batch 8 8 --num-prompts 8 --max-tokens 16"
    from_verb = verb_request(monkeypatch, "run_twin", argv.split())  # no prompt named: locate where one diverged
    assert isinstance(from_notebook, api.TwinRequest)
    same(from_notebook, from_verb)


def test_notebook_08_and_the_verb_make_the_same_performance_twin_request(monkeypatch):
    from_notebook = notebook_request(monkeypatch, "08_profile.ipynb", "run_perf_twin", "## Why is B slower than A")
    argv = "twin --perf --recipe cpu-tiny --set B:engine.tensor_parallel_size=2 --input-len 64 256 --num-prompts 16"
    from_verb = verb_request(monkeypatch, "run_perf_twin", [*argv.split(), "--repeats", "1", "--warmup", "0"])
    assert isinstance(from_notebook, api.PerfTwinRequest)
    same(from_notebook, from_verb)
