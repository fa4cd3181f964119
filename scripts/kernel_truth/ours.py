"""The calls our own NPU adapters make, per recipe, read from their source the way vllm-ascend's is read.

`recipe_calls(op, recipe)` walks the function `npu_op(op, {recipe: function})` registers in
ascend_backend/npu/adapters/*.py and returns its torch_npu calls (`npu.npu_quant_matmul(...)`: the
guard hands the module in as `npu`), with their argument names and literal values, for every path
through the adapter (partial rotary, float16 vs bfloat16 masks, ...). The audit binds both sides to
op-plugin's declared schema and compares what is passed.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from scripts.kernel_truth.mirror import ParsedTree
from scripts.kernel_truth.paths import KernelCall
from scripts.kernel_truth.trace import Walker
from scripts.kernel_truth.values import NOTHING, FuncRef, Opaque

ROOT = Path(__import__("ascend_backend").__file__).resolve().parents[1]  # the checkout whose adapters are audited
ADAPTERS = "ascend_backend/npu/adapters"


class LocalTree(ParsedTree):
    """The Tree interface over this checkout (only what the walker needs)."""

    ref = "worktree"
    commit = "worktree"

    def __init__(self, root: Path = ROOT) -> None:
        super().__init__()
        self.root = root

    @functools.cached_property
    def files(self) -> frozenset[str]:
        return frozenset(str(p.relative_to(self.root)) for p in (self.root / "ascend_backend").rglob("*.py"))

    def text(self, path: str) -> str | None:
        return (self.root / path).read_text(encoding="utf-8") if self.exists(path) else None

    def grep(self, needle: str, prefix: str = "ascend_backend/") -> list[str]:
        return [p for p in sorted(self.files) if p.startswith(prefix) and needle in (self.text(p) or "")]


class _NoFacts:
    def lookup(self, *_args):
        return NOTHING


@functools.cache
def _registrations() -> dict[tuple[str, str], tuple[str, str]]:
    """(op, recipe) -> (module path, function name), from every `npu_op("op", {"recipe": function})`."""
    tree = LocalTree()
    found = {}
    for path in sorted(tree.files):
        if not path.startswith(ADAPTERS):
            continue
        module = tree.module(path)
        for node in ast.walk(module.node):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "npu_op" and len(node.args) >= 2:
                op, recipes = node.args[0], node.args[1]
                if isinstance(op, ast.Constant) and isinstance(recipes, ast.Dict):
                    for key, value in zip(recipes.keys, recipes.values):
                        if isinstance(key, ast.Constant) and isinstance(value, ast.Name):
                            found[(op.value, key.value)] = (path, value.id)
    return found


@functools.cache
def recipe_calls(op: str, recipe: str) -> tuple[tuple[KernelCall, ...], ...]:
    """Every path's torch_npu calls of our recipe (empty when we have no such recipe)."""
    where = _registrations().get((op, recipe))
    if where is None:
        return ()
    path, name = where
    tree = LocalTree()
    module = tree.module(path)
    node = module.functions.get(name)
    if node is None:
        return ()
    walker = Walker(tree, _NoFacts(), npu_heads=("npu",))  # type: ignore[arg-type]
    params = [a.arg for a in node.args.args]
    args = {p: Opaque(p) for p in params}
    states = walker.run(FuncRef(module, node), args)
    out = []
    for state in states:
        calls = tuple(c for c in state.calls if c.kind == "torch_npu")
        if calls and calls not in out:
            out.append(calls)
    return tuple(out)


def recipe_location(op: str, recipe: str) -> str | None:
    where = _registrations().get((op, recipe))
    return f"{where[0]} ({where[1]})" if where else None
