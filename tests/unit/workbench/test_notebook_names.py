"""Every name a notebook takes from a workbench module exists there.

A notebook runs only in the notebook tier (minutes, real servers), so a renamed function would otherwise be
found there, after the whole unit tier passed: `twin.make_sides` went when twin's sides became typed, and
notebooks 12 and 13 still called it. Here each code cell's imports of workbench modules are read, and every
`alias.name` the cells use must be an attribute of the module imported under that alias.
"""

from __future__ import annotations

import ast
import importlib
import json

import pytest

from tests.conftest import REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))


def _code(path) -> ast.Module:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    lines = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    kept = ["\n".join(line for line in cell.splitlines() if not line.lstrip().startswith(("%", "!"))) for cell in lines]
    return ast.parse("\n".join(kept))


def _aliases(tree: ast.Module) -> dict[str, str]:
    """alias -> module for `import workbench.x as a` and `from workbench.x import y as a` (y a module)."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.asname: a.name for a in node.names if a.asname and a.name.startswith("workbench")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("workbench"):
            for a in node.names:
                candidate = f"{node.module}.{a.name}"
                if importlib.util.find_spec(candidate.split(".")[0]) and _is_module(candidate):
                    found[a.asname or a.name] = candidate
    return found


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_module_attribute_a_notebook_uses_exists(path):
    tree = _code(path)
    aliases = _aliases(tree)
    missing = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            module = importlib.import_module(aliases[node.value.id])
            if not hasattr(module, node.attr):
                missing.append(f"{node.value.id}.{node.attr} ({aliases[node.value.id]}, line {node.lineno})")
    assert not missing, f"{path.name} uses names its modules do not have: {missing}"
