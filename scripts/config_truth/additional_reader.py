"""Which `additional_config` keys a vllm-ascend source tree reads: a small abstract interpreter over its AST.

vllm-ascend reads `additional_config` (the dict vLLM hands over from `--additional-config`) in many
shapes that changed from release to release: `additional_config.get("key", default)`, nested sections
passed to a config class (`TorchairGraphConfig(additional_config.get("torchair_graph_config", {}))`),
`Cls(**section)` into keyword parameters, class-level `_defaults` dicts copied and overridden key by key,
and generic helpers called with the key as a string (`_get_config_value(scheduler_config,
additional_config, "key", default, "ENV_NAME")`). Reading each tag by hand does not scale to forty
tags, so this module follows the values instead:

- a value is a *section* (a path such as `additional_config.scheduler_config`), a string constant or
  unknown; every variable or parameter named `additional_config` and every `X.additional_config`
  attribute is the root section;
- `section.get("k")`, `section["k"]` and `"k" in section` read `path.k`;
- a section passed to a class, method or function binds that parameter in the callee, which is then
  read with those bindings (string arguments too, so a helper's `config_key` resolves), and a helper's
  returned section flows back to the caller;
- how a section treats keys it does not know is judged from the code that receives it: a `raise` in a
  test or loop over its keys rejects them, `Cls(**section)` without `**kwargs` rejects them with a
  TypeError, anything else ignores them;
- a read inside a branch that warns about deprecation is `deprecated`; a `"k" in section` test whose
  branch raises is `rejected` (a removed key that start-up refuses); an environment variable read in
  the same helper call as a key is that key's `fallback`.

What this cannot see (a key assembled at run time, a section handed through a container) the curated
rules in `curated.yaml` add, each anchored to a line of vllm-ascend's code so the generator re-checks it per tag.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

ROOT = "additional_config"
MISSING = object()


@dataclass(frozen=True)
class Section:
    path: str


@dataclass(frozen=True)
class Text:
    value: str


@dataclass(frozen=True)
class KeyRead:
    path: str
    file: str
    line: int
    how: str  # get | item | contains | kwarg | defaults | helper
    default: Any = MISSING
    status: str = "read"  # read | deprecated | rejected


@dataclass(frozen=True)
class EnvFallback:
    env: str
    setting: str  # the additional_config path the variable stands in for
    file: str
    line: int


@dataclass(frozen=True)
class SectionPolicy:
    path: str
    unknown_keys: str  # ignored | rejected | warned | copied (every key set on the section's object)
    file: str
    line: int


@dataclass
class Findings:
    reads: list[KeyRead] = field(default_factory=list)
    fallbacks: list[EnvFallback] = field(default_factory=list)
    policies: list[SectionPolicy] = field(default_factory=list)
    allowed: dict[str, tuple[Any, ...]] = field(default_factory=dict)  # path -> the values start-up accepts

    def add(self, read: KeyRead) -> None:
        self.reads.append(read)


@dataclass(frozen=True)
class _Func:
    file: str
    node: ast.FunctionDef | ast.AsyncFunctionDef
    owner: ast.ClassDef | None

    @property
    def is_static(self) -> bool:
        return any(_name(d) == "staticmethod" for d in self.node.decorator_list)

    def params(self) -> list[str]:
        args = self.node.args
        names = [a.arg for a in args.posonlyargs + args.args]
        if self.owner is not None and not self.is_static and names:
            names = names[1:]  # self / cls
        return names


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return _name(node.func)
    return None


def _literal(node: ast.AST | None) -> Any:
    if node is None:
        return MISSING
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    try:  # 18 * 1024 * 1024 and the like
        if isinstance(node, ast.BinOp) and all(
            isinstance(n, (ast.Constant, ast.BinOp, ast.operator)) for n in ast.walk(node)
        ):
            return eval(compile(ast.Expression(node), "<default>", "eval"), {"__builtins__": {}})  # noqa: S307
    except Exception:  # noqa: BLE001 - an expression we cannot fold is simply not a literal
        pass
    return MISSING


def _mentions_deprecation(node: ast.AST) -> bool:
    """A logger call (or warnings.warn) whose message says 'deprecat'."""
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and (_name(call.func) or "").startswith(("warning", "warn", "info")):
            for const in ast.walk(call):
                if (
                    isinstance(const, ast.Constant)
                    and isinstance(const.value, str)
                    and "deprecat" in const.value.lower()
                ):
                    return True
    return False


def _raises(body: list[ast.stmt]) -> bool:
    return any(isinstance(n, ast.Raise) for stmt in body for n in ast.walk(stmt))


class Analyzer:
    def __init__(self, sources: dict[str, str]):
        self.trees: dict[str, ast.Module] = {}
        for path, text in sources.items():
            try:
                self.trees[path] = ast.parse(text)
            except SyntaxError:
                continue  # a file this Python cannot parse is skipped, not guessed at
        self.classes: dict[str, tuple[str, ast.ClassDef]] = {}
        self.functions: dict[str, _Func] = {}
        for path, tree in self.trees.items():
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    self.classes.setdefault(node.name, (path, node))
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.functions.setdefault(node.name, _Func(path, node, None))
        self.found = Findings()
        self._seen_contexts: set[tuple[int, frozenset]] = set()
        self._seen_reads: set[tuple] = set()

    # -- entry -----------------------------------------------------------------------------------

    def run(self) -> Findings:
        for path, tree in self.trees.items():
            for func in self._all_functions(path, tree):
                self._analyze(func, {})
        return self.found

    def _all_functions(self, path: str, tree: ast.Module) -> Iterator[_Func]:
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield _Func(path, node, None)
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        yield _Func(path, item, node)

    # -- one function under bindings ---------------------------------------------------------------

    def _analyze(self, func: _Func, bindings: dict[str, Any]) -> list[Any]:
        """Walk `func` with parameters bound; returns the values its return statements evaluate to."""
        key = (id(func.node), frozenset((k, v) for k, v in bindings.items()))
        if key in self._seen_contexts:
            return []
        self._seen_contexts.add(key)
        env: dict[str, Any] = dict(bindings)
        scope = _Scope(self, func, env)
        scope.walk(func.node.body, status="read")
        for name, value in bindings.items():
            if isinstance(value, Section):
                self._judge_unknown_keys(func, name, value)
        if scope.env_reads and scope.key_reads and any(isinstance(v, Text) for v in bindings.values()):
            # An environment variable read in the same helper call (one handed a key name) stands in
            # for that key.
            target = scope.key_reads[0]
            for env_name, line in scope.env_reads:
                self.found.fallbacks.append(EnvFallback(env_name, target, func.file, line))
        return scope.returns

    def record(self, read: KeyRead) -> None:
        ident = (read.path, read.file, read.line, read.how, read.status)
        if ident not in self._seen_reads:
            self._seen_reads.add(ident)
            self.found.add(read)

    def _allowed_values(self, func: _Func, section: Section) -> None:
        """`if self.mode not in ["a", "b"]: raise ...` anywhere in the receiving class: the key `mode` of
        `section` accepts only those values (the attribute is named after the key, as these classes do)."""
        if func.owner is None:
            return
        tests = [
            test
            for node in ast.walk(func.owner)
            if isinstance(node, ast.If) and _raises(node.body)
            for test in ast.walk(node.test)  # `not isinstance(x, str) or x not in (...)` too
            if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotIn)
        ]
        # `assert self.mode in (0, 1)`: the values the release accepts, the same as a raise on `not in`
        tests += [
            node.test
            for node in ast.walk(func.owner)
            if isinstance(node, ast.Assert)
            and isinstance(node.test, ast.Compare)
            and len(node.test.ops) == 1
            and isinstance(node.test.ops[0], ast.In)
        ]
        for test in tests:
            target = test.left
            key = None
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                key = target.attr
            elif isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
                key = str(target.slice.value)
            values = _literal(test.comparators[0])
            ref = test.comparators[0]
            if values is MISSING and isinstance(ref, ast.Attribute) and isinstance(ref.value, ast.Name):
                values = _class_constant(func.owner, ref.attr)  # `not in self._valid_modes`
            if key and isinstance(values, (list, tuple, set, frozenset)) and values:
                self.found.allowed.setdefault(f"{section.path}.{key}", tuple(sorted(values, key=str)))

    def _judge_unknown_keys(self, func: _Func, name: str, section: Section) -> None:
        """How the code that receives `section` (as parameter `name`) treats keys it does not know."""
        self._allowed_values(func, section)
        for node in ast.walk(func.node):
            if isinstance(node, ast.For) and _iterates_keys(node.iter, name) and _sets_attributes(node):
                # every key is copied onto the object; a same-named dataclass elsewhere picks its fields
                self.found.policies.append(SectionPolicy(section.path, "copied", func.file, node.lineno))
                self._twin_fields(func, section)
                return
            if isinstance(node, (ast.If, ast.For)):
                probe = node.test if isinstance(node, ast.If) else node.iter
                if _iterates_keys(probe, name) or (isinstance(node, ast.For) and _iterates_keys(node.iter, name)):
                    if _raises(node.body) or _raises(getattr(node, "orelse", [])):
                        self.found.policies.append(SectionPolicy(section.path, "rejected", func.file, node.lineno))
                        self._defaults_keys(func, section)
                        return
                    for inner in ast.walk(node):
                        if isinstance(inner, ast.Call) and (_name(inner.func) or "").startswith("warn"):
                            self.found.policies.append(SectionPolicy(section.path, "warned", func.file, node.lineno))
                            return
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp):
                # unknown = set(user_config) - set(self._defaults); if unknown: raise
                if isinstance(node.value.op, ast.Sub) and _iterates_keys(node.value.left, name):
                    names = {t.id for t in node.targets if isinstance(t, ast.Name)}
                    for test in ast.walk(func.node):
                        if (
                            isinstance(test, ast.If)
                            and {n.id for n in ast.walk(test.test) if isinstance(n, ast.Name)} & names
                            and _raises(test.body)
                        ):
                            self.found.policies.append(SectionPolicy(section.path, "rejected", func.file, test.lineno))
                            self._defaults_keys(func, section)
                            return
        self._defaults_keys(func, section)

    def _twin_fields(self, func: _Func, section: Section) -> None:
        """Fields of a dataclass of the same name as the class that copies the section (the config object
        is handed to it, and it takes the attributes named like its fields)."""
        if func.owner is None:
            return
        for path, tree in self.trees.items():
            for node in tree.body:
                if not (isinstance(node, ast.ClassDef) and node.name == func.owner.name and node is not func.owner):
                    continue
                if not any(_name(d) == "dataclass" for d in node.decorator_list):
                    continue
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        default = _literal(item.value) if item.value is not None else MISSING
                        self.record(KeyRead(f"{section.path}.{item.target.id}", path, item.lineno, "field", default))

    def _defaults_keys(self, func: _Func, section: Section) -> None:
        """Keys of a class-level defaults dict the receiving class consults (`self._defaults`)."""
        if func.owner is None:
            return
        used = {n.attr for n in ast.walk(func.node) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
        for item in func.owner.body:
            if isinstance(item, (ast.Assign, ast.AnnAssign)):
                target = item.targets[0] if isinstance(item, ast.Assign) else item.target
                if (
                    isinstance(target, ast.Name)
                    and "default" in target.id.lower()
                    and target.id in used
                    and isinstance(item.value, ast.Dict)
                ):
                    for k, v in zip(item.value.keys, item.value.values):
                        if isinstance(k, ast.Constant) and isinstance(k.value, str):
                            self.record(
                                KeyRead(f"{section.path}.{k.value}", func.file, k.lineno, "defaults", _literal(v))
                            )

    # -- calls -----------------------------------------------------------------------------------

    def call(self, scope: _Scope, node: ast.Call, status: str) -> Any:
        """Follow a call whose arguments carry sections or strings into its callee."""
        args = [scope.value(a, status) for a in node.args if not isinstance(a, ast.Starred)]
        kwargs = {kw.arg: scope.value(kw.value, status) for kw in node.keywords if kw.arg}
        splat = [scope.value(kw.value, status) for kw in node.keywords if kw.arg is None]
        interesting = any(isinstance(v, (Section, Text)) for v in [*args, *kwargs.values()]) or any(
            isinstance(v, Section) for v in splat
        )
        if not interesting:
            return None
        callee = self._resolve(scope, node.func)
        if callee is None:
            return None
        func, is_class = callee
        if func is None:  # a dataclass: its fields are the keyword parameters
            return None
        if any(isinstance(v, Section) for v in splat):
            section = next(v for v in splat if isinstance(v, Section))
            self._kwargs_section(func, section, node.lineno)
        params = func.params()
        bindings: dict[str, Any] = {}
        for name, value in zip(params, args):
            if isinstance(value, (Section, Text)):
                bindings[name] = value
        for name, value in kwargs.items():
            if name in params and isinstance(value, (Section, Text)):
                bindings[name] = value
        returns = self._analyze(func, bindings) if bindings else []
        if is_class:
            return None
        return next((r for r in returns if isinstance(r, Section)), None)

    def _kwargs_section(self, func: _Func, section: Section, line: int) -> None:
        """`Cls(**section)`: the keyword parameters are the keys; `**kwargs` decides about the rest."""
        args = func.node.args
        named = args.args[1:] if func.owner is not None and not func.is_static else args.args
        defaults = [MISSING] * (len(named) - len(args.defaults)) + list(args.defaults)
        for arg, default in zip(named, defaults):
            value = _literal(default) if default is not MISSING else MISSING
            self.record(KeyRead(f"{section.path}.{arg.arg}", func.file, arg.lineno, "kwarg", value))
        for arg, default in zip(args.kwonlyargs, args.kw_defaults):
            self.record(KeyRead(f"{section.path}.{arg.arg}", func.file, arg.lineno, "kwarg", _literal(default)))
        if args.kwarg is not None:
            self.found.policies.append(SectionPolicy(section.path, "ignored", func.file, func.node.lineno))
            self._analyze(func, {args.kwarg.arg: section})
        else:
            self.found.policies.append(SectionPolicy(section.path, "rejected", func.file, func.node.lineno))

    def _resolve(self, scope: _Scope, target: ast.AST) -> tuple[_Func | None, bool] | None:
        name = _name(target)
        if name is None:
            return None
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            if target.value.id in {"self", "cls"} and scope.func.owner is not None:
                method = _method(scope.func.owner, name)
                if method is not None:
                    return _Func(scope.func.file, method, scope.func.owner), False
        if name in self.classes:
            path, cls = self.classes[name]
            init = _method(cls, "__init__")
            if init is not None:
                return _Func(path, init, cls), True
            return None
        if isinstance(target, ast.Name) and name in self.functions:
            return self.functions[name], False
        return None


def _class_constant(cls: ast.ClassDef, name: str) -> Any:
    for item in cls.body:
        if isinstance(item, (ast.Assign, ast.AnnAssign)):
            target = item.targets[0] if isinstance(item, ast.Assign) else item.target
            if isinstance(target, ast.Name) and target.id == name and item.value is not None:
                return _literal(item.value)
    return MISSING


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    return next(
        (n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name), None
    )


def _sets_attributes(loop: ast.For) -> bool:
    """Whether a loop over a dict's items sets each one on an object (`setattr(self, k, v)`)."""
    return any(isinstance(n, ast.Call) and _name(n.func) == "setattr" for n in ast.walk(loop))


def _iterates_keys(node: ast.AST, name: str) -> bool:
    """`set(name)`, `name.keys()`, `name.items()`, `name` itself (in a for), or a BinOp built from them."""
    if isinstance(node, ast.Name):
        return node.id == name
    if isinstance(node, ast.BinOp):
        return _iterates_keys(node.left, name) or _iterates_keys(node.right, name)
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id in {"set", "list", "sorted"} and node.args:
            return _iterates_keys(node.args[0], name)
        if isinstance(node.func, ast.Attribute) and node.func.attr in {"keys", "items"}:
            return isinstance(node.func.value, ast.Name) and node.func.value.id == name
    return False


class _Scope:
    """One walk of one function body: variable bindings, reads found, values returned."""

    def __init__(self, analyzer: Analyzer, func: _Func, env: dict[str, Any]):
        self.analyzer = analyzer
        self.func = func
        self.env = env
        self.returns: list[Any] = []
        self.key_reads: list[str] = []
        self.env_reads: list[tuple[str, int]] = []

    # statements
    def walk(self, body: list[ast.stmt], status: str) -> None:
        for stmt in body:
            self.statement(stmt, status)

    def statement(self, stmt: ast.stmt, status: str) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return  # nested definitions are entered when called
        if isinstance(stmt, ast.If):
            branch = status
            # Only the branch's own statements: a nested `if` that warns judges its own test.
            if any(_mentions_deprecation(inner) for inner in stmt.body if not isinstance(inner, ast.If)):
                branch = "deprecated"
            removed = _raises(stmt.body) and not stmt.orelse
            self.test(stmt.test, branch, removed)
            self.walk(stmt.body, branch)
            self.walk(stmt.orelse, status)
            return
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            value_node = stmt.value
            if value_node is None:
                return
            value = self.value(value_node, status)
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                slot = _slot(target)
                if slot is not None:
                    # May-analysis: `x = x or {}` and `if x is None: x = {}` keep x's section.
                    if isinstance(value, (Section, Text)):
                        self.env[slot] = value
                else:
                    self.value(target, status)
            return
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            self.returns.append(self.value(stmt.value, status))
            return
        # any other statement: evaluate its expressions and walk nested bodies
        for _name, child in ast.iter_fields(stmt):
            if isinstance(child, list):
                if child and isinstance(child[0], ast.stmt):
                    self.walk(child, status)
                else:
                    for item in child:
                        if isinstance(item, ast.expr):
                            self.value(item, status)
            elif isinstance(child, ast.expr):
                self.value(child, status)

    def test(self, node: ast.expr, status: str, removed: bool) -> None:
        """An `if` test: `"k" in section` reads k (rejected when the branch only raises)."""
        if isinstance(node, ast.BoolOp):
            for item in node.values:
                self.test(item, status, removed)
        elif isinstance(node, ast.UnaryOp):
            self.test(node.operand, status, removed=False)
        elif isinstance(node, ast.Compare):
            self.compare(node, status, removed)
        else:
            self.value(node, status)

    def compare(self, node: ast.Compare, status: str, removed: bool) -> None:
        left = self.value(node.left, status)
        rights = [self.value(c, status) for c in node.comparators]
        if len(node.ops) != 1 or not isinstance(node.ops[0], (ast.In, ast.NotIn)) or not isinstance(left, Text):
            return
        if isinstance(rights[0], Section):
            how_status = "rejected" if removed and isinstance(node.ops[0], ast.In) else status
            self.read(f"{rights[0].path}.{left.value}", node.lineno, "contains", MISSING, how_status)
        elif _is_environ(node.comparators[0]):
            self.env_reads.append((left.value, node.lineno))

    # expressions
    def read(self, path: str, line: int, how: str, default: Any, status: str) -> None:
        self.key_reads.append(path)
        self.analyzer.record(KeyRead(path, self.func.file, line, how, default, status))

    def value(self, node: ast.AST, status: str) -> Any:  # noqa: C901 - one dispatch over node kinds
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return Text(node.value)
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            if node.id == ROOT:
                return Section(ROOT)
            return None
        if isinstance(node, ast.Attribute):
            if node.attr == ROOT:
                self.value(node.value, status)
                return Section(ROOT)
            slot = _slot(node)
            if slot is not None and slot in self.env:
                return self.env[slot]
            self.value(node.value, status)
            return None
        if isinstance(node, ast.Subscript):
            base = self.value(node.value, status)
            key = self.value(node.slice, status)
            if isinstance(base, Section) and isinstance(key, Text) and isinstance(node.ctx, ast.Load):
                path = f"{base.path}.{key.value}"
                self.read(path, node.lineno, "item", MISSING, status)
                return Section(path)
            return None
        if isinstance(node, ast.Call):
            return self.call(node, status)
        if isinstance(node, ast.IfExp):
            self.value(node.test, status)
            a, b = self.value(node.body, status), self.value(node.orelse, status)
            return a if isinstance(a, Section) else b if isinstance(b, Section) else None
        if isinstance(node, ast.BoolOp):
            values = [self.value(v, status) for v in node.values]
            return next((v for v in values if isinstance(v, Section)), None)
        if isinstance(node, ast.Compare):
            self.compare(node, status, removed=False)
            return None
        if isinstance(node, ast.JoinedStr):
            return None
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.value(child, status)
        return None

    def call(self, node: ast.Call, status: str) -> Any:
        func = node.func
        if isinstance(func, ast.Attribute):
            base = self.value(func.value, status)
            if isinstance(base, Section):
                if func.attr == "get" and node.args:
                    key = self.value(node.args[0], status)
                    default = _literal(node.args[1]) if len(node.args) > 1 else None
                    for extra in node.args[1:]:
                        self.value(extra, status)
                    if isinstance(key, Text):
                        path = f"{base.path}.{key.value}"
                        self.read(path, node.lineno, "get", default, status)
                        return Section(path)
                    return None
                if func.attr in {"copy"}:
                    return base
            if _is_environ(func.value) and func.attr == "get" and node.args:
                key = self.value(node.args[0], status)
                if isinstance(key, Text):
                    self.env_reads.append((key.value, node.lineno))
                return None
            if isinstance(func.value, ast.Name) and func.value.id == "os" and func.attr == "getenv" and node.args:
                key = self.value(node.args[0], status)
                if isinstance(key, Text):
                    self.env_reads.append((key.value, node.lineno))
                return None
        if isinstance(func, ast.Name) and func.id in {"dict", "deepcopy"} and node.args:
            inner = self.value(node.args[0], status)
            if isinstance(inner, Section):
                return inner
        if isinstance(func, ast.Attribute) and func.attr == "deepcopy" and node.args:
            inner = self.value(node.args[0], status)
            if isinstance(inner, Section):
                return inner
        return self.analyzer.call(self, node, status)


def _slot(target: ast.AST) -> str | None:
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id in {"self", "cls"}:
        return f"{target.value.id}.{target.attr}"
    return None


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and _name(node.value) == "os"


def read_additional_config(sources: dict[str, str]) -> Findings:
    """Every `additional_config` key read in `sources` (path -> Python text)."""
    return Analyzer(sources).run()
