"""The arguments of a call: both sides' calls bound to the schema of the torch_npu wheel the release pins.

A kernel that matches by name can still be called with other arguments: the audit binds vllm-ascend's
call (as the walker read it) and the call our recipe makes (`ours.py`) to the schema op-plugin declared at
the commit the pinned wheel was built from (the contract tests' data, tests/unit/ascend_backend/npu/data;
the first candidate of a dev wheel, whose candidates declare the same for the functions audited), and
lists every parameter whose value or presence differs.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from scripts.kernel_truth.cells import TagInfo
from scripts.kernel_truth.paths import KernelCall


# ------------------------------------------------------------------------------------------- arguments
def _schemas(torch_npu: str) -> tuple[str, dict[str, Any]] | None:
    from tests.unit.ascend_backend.npu import schema  # the repository's checkout: the audit runs from its root

    try:
        commit = schema.wheel_commits(torch_npu)[0]
    except KeyError:
        return None
    return commit, schema.signatures(commit)


def _defaults(commit: str, function: str) -> dict[str, str]:
    """param -> default text, from the schema string of `function` at op-plugin `commit`."""
    from tests.unit.ascend_backend.npu.schema import schema_data

    entry = schema_data()["commits"][commit]["functions"].get(function)
    if entry is None:
        return {}
    return {name: value.strip() for name, value in re.findall(r"(\w+)\s*=\s*([^,)]+)", entry["schema"].split("->")[0])}


def _bound(call: KernelCall, signature) -> dict[str, str | None]:
    """param -> literal text or None (passed, not a literal); unknown names kept as they are."""
    positional = [p.name for p in signature.params if not p.kw_only]
    literals = dict(call.literals)
    out: dict[str, str | None] = {}
    for i in range(call.positional):
        name = positional[i] if i < len(positional) else f"#{i}"
        out[name] = literals.get(str(i))
    for keyword in call.keywords:
        out[keyword] = literals.get(keyword)
    return out


def _norm(text: str | None) -> str | None:
    if text is None:
        return None
    return text.strip().strip("'\"").replace("torch.", "")


def argument_differences(tag: TagInfo, op: str, recipe: str, theirs: tuple[KernelCall, ...]) -> list[str]:
    from scripts.kernel_truth.ours import recipe_calls

    found = _schemas(tag.torch_npu)
    if found is None:
        return []
    commit, signatures = found
    ours_paths = recipe_calls(op, recipe)
    diffs = []
    for call in theirs:
        if call.kind != "torch_npu" or call.line == 0:  # line 0: a call the audit infers, not a call site
            continue
        fn = call.function
        signature = signatures.get(fn)
        if signature is None:
            continue
        mine = [c for path in ours_paths for c in path if c.function == fn]
        if not mine:
            continue
        defaults = _defaults(commit, fn)
        their_args = _bound(call, signature)
        our_args: dict[str, set[str | None]] = defaultdict(set)
        for c in mine:
            for k, v in _bound(c, signature).items():
                our_args[k].add(v)
        for name, value in their_args.items():
            if name in ("out", "workspace") and call.name.endswith(".out"):
                continue
            if name not in our_args:
                if value is not None and _norm(value) == _norm(defaults.get(name)):
                    continue
                diffs.append(f"{fn}: vllm-ascend passes {name}{'=' + value if value else ''}, the recipe does not")
            elif value is not None and all(v is not None for v in our_args[name]):
                ours = {_norm(v) for v in our_args[name]}
                if _norm(value) not in ours:
                    diffs.append(
                        f"{fn}: {name}={value} in vllm-ascend, {'/'.join(sorted(str(v) for v in ours))} in the recipe"
                    )
        for name, values in our_args.items():
            if name not in their_args and not call.open_kwargs:
                if all(v is not None and _norm(v) == _norm(defaults.get(name)) for v in values):
                    continue
                shown = "/".join(sorted(str(v) for v in values if v is not None))
                diffs.append(f"{fn}: the recipe passes {name}{'=' + shown if shown else ''}, vllm-ascend does not")
    return diffs
