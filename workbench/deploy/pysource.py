"""Python files of a service, read by AST (never imported or run), for three things:

- `LLM(...)`, `EngineArgs(...)`, `AsyncEngineArgs(...)` calls: their literal keyword arguments are engine
  settings (`max_model_len=8192` is `--max-model-len 8192`);
- a launcher that builds a `["vllm", "serve", ...]` argument list itself, and whether it adds flags made
  from the environment (a call to another function appended to that list);
- an environment convention: a module that holds `--flag` names in collections and turns environment names
  into them (`MAX_MODEL_LEN` -> `--max-model-len`): the flags, the aliases (`{"MODEL_NAME": "--model"}`),
  the switches (collections named `*BOOL*`), the dropped ones (`*REMOVED*`) and the reserved names.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from workbench.deploy.model import Convention, Origin, Setting

ENGINE_CALLS = {"LLM", "EngineArgs", "AsyncEngineArgs"}
_TO_ENV = re.compile(
    r"replace\(\s*['\"]-['\"]\s*,\s*['\"]_['\"]\s*\)\s*\.upper\(\)|\.upper\(\)\s*\.replace\(\s*['\"]-['\"]"
    r"|\.lower\(\)\s*\.replace\(\s*['\"]_['\"]\s*,\s*['\"]-['\"]"
)


@dataclass(frozen=True)
class PyLaunch:
    line: int
    launcher: str  # 'vllm serve' or 'LLM()' / 'AsyncEngineArgs()'
    flags: tuple[Setting, ...]
    env_flags: bool  # the launcher appends flags a function builds (from the environment)


_ENGINE_HINT = re.compile(r"\b(?:LLM|EngineArgs|AsyncEngineArgs)\(|[\"']serve[\"']|openai\.api_server")


def worth_parsing(text: str) -> bool:
    """Only a file that may start an engine or declare a convention is parsed (most service code does neither)."""
    return bool(_ENGINE_HINT.search(text) or _TO_ENV.search(text))


def parse(text: str, where: str) -> ast.Module | None:
    try:
        return ast.parse(text, filename=where)
    except (SyntaxError, ValueError):
        return None


def constants(tree: ast.Module) -> dict[str, str]:
    """Module-level NAME = "text" and NAME = os.getenv("X", "default") (the default)."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _literal(node.value)
            if value is not None:
                found[node.targets[0].id] = value
    return found


def _literal(node: ast.AST, names: dict[str, str] | None = None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, bool)):
        return str(node.value).lower() if isinstance(node.value, bool) else str(node.value)
    if isinstance(node, ast.Name) and names is not None:
        return names.get(node.id)
    if isinstance(node, ast.Call) and _name(node.func) in ("getenv", "get") and len(node.args) == 2:
        return _literal(node.args[1], names)
    return None


def _name(func: ast.AST) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def launches(tree: ast.Module, where: str) -> list[PyLaunch]:
    names = constants(tree)
    found: list[PyLaunch] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) in ENGINE_CALLS:
            found.append(_engine_call(node, where, names))
        elif isinstance(node, ast.List) and _is_serve_list(node):
            flags = _list_flags(node, where, names)
            found.append(PyLaunch(node.lineno, "vllm serve", flags, _extended(tree, node)))
    return found


def _engine_call(node: ast.Call, where: str, names: dict[str, str]) -> PyLaunch:
    flags: list[Setting] = []
    if node.args:
        value = _literal(node.args[0], names)
        flags.append(Setting("model", value, Origin(where, node.args[0].lineno, f"{_name(node.func)}()")))
    for keyword in node.keywords:
        if keyword.arg is None:
            continue  # **kwargs: not readable here
        value = _literal(keyword.value, names)
        key = "model" if keyword.arg == "model" else f"flag.--{keyword.arg.replace('_', '-')}"
        if value is None and isinstance(keyword.value, (ast.Dict, ast.List)):
            value = _as_json(keyword.value)
        flags.append(Setting(key, value, Origin(where, keyword.value.lineno, f"{_name(node.func)}({keyword.arg}=)")))
    return PyLaunch(node.lineno, f"{_name(node.func)}()", tuple(flags), False)


def _as_json(node: ast.AST) -> str | None:
    """A literal dict or list argument as the JSON vLLM's command line would take (None when not literal)."""
    import json

    try:
        return json.dumps(ast.literal_eval(node))
    except (ValueError, TypeError, SyntaxError):
        return None


def _is_serve_list(node: ast.List) -> bool:
    head = [e.value for e in node.elts[:2] if isinstance(e, ast.Constant)]
    return head == ["vllm", "serve"] or any(
        isinstance(e, ast.Constant) and e.value == "vllm.entrypoints.openai.api_server" for e in node.elts
    )


def _list_flags(node: ast.List, where: str, names: dict[str, str]) -> tuple[Setting, ...]:
    from workbench.deploy.argv import read_flags, words_at

    texts, lines = [], []
    for element in node.elts:
        value = _literal(element, names)
        if value is not None:
            texts.append(value)
            lines.append(element.lineno)
    return read_flags(words_at(texts, lines), where, {}, "launcher list").flags


def _extended(tree: ast.Module, node: ast.List) -> bool:
    """`argv = ["vllm", "serve", ...]` followed by `argv += build_args()` (or `argv.extend(...)`)."""
    target = next(
        (
            a.targets[0].id
            for a in ast.walk(tree)
            if isinstance(a, ast.Assign) and a.value is node and isinstance(a.targets[0], ast.Name)
        ),
        None,
    )
    for other in ast.walk(tree):
        if isinstance(other, ast.AugAssign) and isinstance(other.target, ast.Name) and other.target.id == target:
            return isinstance(other.value, ast.Call)
        if isinstance(other, ast.Call) and _name(other.func) == "extend" and isinstance(other.func, ast.Attribute):
            if isinstance(other.func.value, ast.Name) and other.func.value.id == target:
                return True
    return False


def convention(tree: ast.Module, text: str, where: str) -> Convention:
    """The environment convention a module declares, or an empty one."""
    if not _TO_ENV.search(text):
        return Convention()
    flags: dict[str, str] = {}
    origins: dict[str, Origin] = {}
    booleans: set[str] = set()
    negatable: set[str] = set()
    removed: set[str] = set()
    reserved: set[str] = set()
    aliases: dict[str, tuple[str, int]] = {}
    for name, value in _collections(tree):
        upper = name.upper()
        strings = [
            (e.value, e.lineno) for e in _elements(value) if isinstance(e, ast.Constant) and isinstance(e.value, str)
        ]
        if isinstance(value, ast.Dict):
            aliases.update(_aliases(value))
        if "RESERVED" in upper:
            reserved.update(s for s, _ in strings)
        for flag, line in strings:
            if not flag.startswith("--"):
                continue
            if "REMOVED" in upper:
                removed.add(flag)
                continue
            env = flag.lstrip("-").replace("-", "_").upper()
            flags.setdefault(env, flag)
            origins.setdefault(env, Origin(where, line, "convention"))
            if "BOOL" in upper:
                booleans.add(flag)
                if "PAIRED" in upper or "OPTIONAL" in upper:
                    negatable.add(flag)  # argparse BooleanOptionalAction: --flag / --no-flag
    for env in reserved:
        flags.pop(env, None)
    for env, (flag, line) in aliases.items():
        flags[env] = flag
        origins[env] = Origin(where, line, "convention alias")
    return Convention(flags, frozenset(booleans), frozenset(negatable), frozenset(removed), origins)


def _collections(tree: ast.Module):
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if isinstance(node, ast.AnnAssign):
            target = node.target
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and value is not None:
            if isinstance(value, ast.Call) and _name(value.func) in ("frozenset", "set", "tuple") and value.args:
                value = value.args[0]
            if isinstance(value, (ast.Set, ast.List, ast.Tuple, ast.Dict)):
                yield target.id, value


def _elements(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.Dict):
        return [k for k in node.keys if k is not None]
    return list(getattr(node, "elts", []))


def _aliases(node: ast.Dict) -> dict[str, tuple[str, int]]:
    found = {}
    for key, value in zip(node.keys, node.values):
        if isinstance(key, ast.Constant) and isinstance(value, ast.Constant) and isinstance(value.value, str):
            if str(key.value).isupper() and value.value.startswith("--"):
                found[str(key.value)] = (value.value, key.lineno)
    return found
