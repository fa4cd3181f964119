"""Which environment variables a vllm-ascend source tree reads, with type and default.

Two places hold them:

- `vllm_ascend/envs.py`, the project's table: `env_variables = {"NAME": lambda: <parse>(os.getenv("NAME",
  default)), ...}`. Every tag from v0.7.3 to main uses four parse shapes, which decide what a value
  must look like: `bool(int(...))` (an integer; `true` raises ValueError at start-up), `int(...)`,
  `....lower()` (text, compared lower-cased) and the bare string;
- direct reads anywhere under `vllm_ascend/` (`os.getenv("X")`, `os.environ.get("X")`,
  `os.environ["X"]`, `"X" in os.environ`), often of CANN's or HCCL's own variables.

A variable of the table that only `setup.py` uses (and no runtime module) is build-time: setting it in
a serving command does nothing. A `# DEPRECATED` comment right above an entry marks it deprecated.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

ENVS_PATH = "vllm_ascend/envs.py"
_GETTERS = {("os", "getenv"), ("environ", "get")}


@dataclass(frozen=True)
class EnvRead:
    name: str
    file: str
    line: int
    type: str  # int01 | int | text_lower | text | unknown
    default: Any  # the text default as written (None: unset)
    table: bool  # declared in envs.py
    deprecated: bool = False
    alias_of: str | None = None  # a direct read kept as the alias of this envs-table variable


def _getenv_call(node: ast.AST) -> ast.Call | None:
    for inner in ast.walk(node):
        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute):
            owner = inner.func.value
            owner_name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", None)
            if (owner_name, inner.func.attr) in _GETTERS:
                return inner
    return None


def _parse_shape(body: ast.AST) -> str:
    """The parse the lambda applies around os.getenv."""
    if isinstance(body, ast.Call) and isinstance(body.func, ast.Name):
        if body.func.id == "bool" and body.args and isinstance(body.args[0], ast.Call):
            inner = body.args[0]
            if isinstance(inner.func, ast.Name) and inner.func.id == "int":
                return "int01"
        if body.func.id == "int":
            return "int"
        if body.func.id == "float":
            return "float"
    if isinstance(body, ast.Call) and isinstance(body.func, ast.Attribute) and body.func.attr == "lower":
        return "text_lower"
    if _getenv_call(body) is body:
        return "text"
    return "unknown"


def _default(call: ast.Call) -> Any:
    if len(call.args) < 2:
        return None
    node = call.args[1]
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError):
        try:
            value = eval(compile(ast.Expression(node), "<default>", "eval"), {"__builtins__": {}})  # noqa: S307
        except Exception:  # noqa: BLE001 - an expression we cannot fold stays unknown
            return ast.unparse(node)
    return None if value is None else str(value)


def read_envs_table(text: str) -> list[EnvRead]:
    """The entries of envs.py's `env_variables`, in order."""
    tree = ast.parse(text)
    lines = text.splitlines()
    found: list[EnvRead] = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        if getattr(target, "id", None) != "env_variables" or not isinstance(node.value, ast.Dict):
            continue
        for key, value in zip(node.value.keys, node.value.values):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                continue
            body = value.body if isinstance(value, ast.Lambda) else value
            call = _getenv_call(body)
            found.append(
                EnvRead(
                    name=key.value,
                    file=ENVS_PATH,
                    line=key.lineno,
                    type=_parse_shape(body),
                    default=_default(call) if call is not None else None,
                    table=True,
                    deprecated=_deprecated_comment(lines, key.lineno),
                )
            )
    return found


def _deprecated_comment(lines: list[str], line: int) -> bool:
    """A comment block directly above the entry that says DEPRECATED."""
    i = line - 2
    while i >= 0 and lines[i].strip().startswith("#"):
        if re.search(r"\bdeprecat", lines[i], re.I):
            return True
        i -= 1
    return False


def read_direct(path: str, text: str) -> list[EnvRead]:
    """Reads of literal variable names outside envs.py (loads only: a write is not a setting read)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    found = []
    aliases = _aliases(tree)
    for node in ast.walk(tree):
        name, default = None, None
        if isinstance(node, ast.Call):
            call = _getenv_call(node)
            if call is node and node.args and isinstance(node.args[0], ast.Constant):
                name, default = node.args[0].value, _default(node)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            if isinstance(node.slice, ast.Constant):
                name = node.slice.value
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            if _is_environ(node.comparators[0]) and isinstance(node.left, ast.Constant):
                name = node.left.value
        if isinstance(name, str) and re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
            found.append(EnvRead(name, path, node.lineno, "text", default, table=False, alias_of=aliases.get(name)))
    return found


def _aliases(tree: ast.Module) -> dict[str, str]:
    """OLD -> NEW for `envs.NEW or ... os.getenv("OLD")` in one `or`: a direct read of an old name next to the
    envs table's variable in the same test is that variable's alias, kept for backward compatibility."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or)):
            continue
        table = [
            n.attr
            for value in node.values
            for n in ast.walk(value)
            if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and n.value.id in ("envs", "envs_ascend")
            and re.fullmatch(r"[A-Z][A-Z0-9_]*", n.attr)
        ]
        direct = [
            n.args[0].value
            for value in node.values
            for n in ast.walk(value)
            if isinstance(n, ast.Call) and _getenv_call(n) is n and n.args and isinstance(n.args[0], ast.Constant)
        ]
        if len(table) == 1:
            for name in direct:
                if isinstance(name, str) and name != table[0] and name.startswith(table[0].rstrip("0123456789")[:12]):
                    found.setdefault(name, table[0])
    return found


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def table_names_used(text: str, module_aliases: tuple[str, ...] = ("envs", "envs_ascend", "ascend_envs")) -> set[str]:
    """NAME for every `envs.NAME` (or an alias of the envs module) in `text`."""
    pattern = re.compile(r"\b(?:{})\.([A-Z][A-Z0-9_]*)\b".format("|".join(module_aliases)))
    return set(pattern.findall(text))


VLLM_ENVS_ALIASES = ("envs", "envs_vllm", "vllm_envs", "envs_v")


def vllm_env_uses(path: str, text: str) -> list[tuple[str, int]]:
    """(NAME, line) of the first `envs.VLLM_X` per name in `text` (vLLM's envs module, under the names
    vllm-ascend imports it as); the caller keeps only names vllm-ascend's own table lacks."""
    pattern = re.compile(r"\b(?:{})\.(VLLM_[A-Z0-9_]*)\b".format("|".join(VLLM_ENVS_ALIASES)))
    found: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        for name in pattern.findall(line):
            found.setdefault(name, number)
    return sorted(found.items(), key=lambda item: item[1])
