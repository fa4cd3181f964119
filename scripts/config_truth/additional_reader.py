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
from typing import Any

from additional_model import (
    MISSING,
    EnvFallback,
    Findings,
    Func,
    KeyRead,
    Section,
    SectionPolicy,
    Text,
    class_constant,
    iterates_keys,
    literal,
    method_of,
    name_of,
    raises,
    sets_attributes,
)
from additional_scope import Scope


class Analyzer:
    def __init__(self, sources: dict[str, str]):
        self.trees: dict[str, ast.Module] = {}
        for path, text in sources.items():
            try:
                self.trees[path] = ast.parse(text)
            except SyntaxError:
                continue  # a file this Python cannot parse is skipped, not guessed at
        self.classes: dict[str, tuple[str, ast.ClassDef]] = {}
        self.functions: dict[str, Func] = {}
        for path, tree in self.trees.items():
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    self.classes.setdefault(node.name, (path, node))
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.functions.setdefault(node.name, Func(path, node, None))
        self.found = Findings()
        self._seen_contexts: set[tuple[int, frozenset]] = set()
        self._seen_reads: set[tuple] = set()

    # -- entry -----------------------------------------------------------------------------------

    def run(self) -> Findings:
        for path, tree in self.trees.items():
            for func in self._all_functions(path, tree):
                self._analyze(func, {})
        return self.found

    def _all_functions(self, path: str, tree: ast.Module) -> Iterator[Func]:
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield Func(path, node, None)
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        yield Func(path, item, node)

    # -- one function under bindings ---------------------------------------------------------------

    def _analyze(self, func: Func, bindings: dict[str, Any]) -> list[Any]:
        """Walk `func` with parameters bound; returns the values its return statements evaluate to."""
        key = (id(func.node), frozenset((k, v) for k, v in bindings.items()))
        if key in self._seen_contexts:
            return []
        self._seen_contexts.add(key)
        env: dict[str, Any] = dict(bindings)
        scope = Scope(self, func, env)
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

    def _allowed_values(self, func: Func, section: Section) -> None:
        """`if self.mode not in ["a", "b"]: raise ...` anywhere in the receiving class: the key `mode` of
        `section` accepts only those values (the attribute is named after the key, as these classes do)."""
        if func.owner is None:
            return
        tests = [
            test
            for node in ast.walk(func.owner)
            if isinstance(node, ast.If) and raises(node.body)
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
            values = literal(test.comparators[0])
            ref = test.comparators[0]
            if values is MISSING and isinstance(ref, ast.Attribute) and isinstance(ref.value, ast.Name):
                values = class_constant(func.owner, ref.attr)  # `not in self._valid_modes`
            if key and isinstance(values, (list, tuple, set, frozenset)) and values:
                self.found.allowed.setdefault(f"{section.path}.{key}", tuple(sorted(values, key=str)))

    def _judge_unknown_keys(self, func: Func, name: str, section: Section) -> None:
        """How the code that receives `section` (as parameter `name`) treats keys it does not know."""
        self._allowed_values(func, section)
        for node in ast.walk(func.node):
            if isinstance(node, ast.For) and iterates_keys(node.iter, name) and sets_attributes(node):
                # every key is copied onto the object; a same-named dataclass elsewhere picks its fields
                self.found.policies.append(SectionPolicy(section.path, "copied", func.file, node.lineno))
                self._twin_fields(func, section)
                return
            if isinstance(node, (ast.If, ast.For)):
                probe = node.test if isinstance(node, ast.If) else node.iter
                if iterates_keys(probe, name) or (isinstance(node, ast.For) and iterates_keys(node.iter, name)):
                    if raises(node.body) or raises(getattr(node, "orelse", [])):
                        self.found.policies.append(SectionPolicy(section.path, "rejected", func.file, node.lineno))
                        self._defaults_keys(func, section)
                        return
                    for inner in ast.walk(node):
                        if isinstance(inner, ast.Call) and (name_of(inner.func) or "").startswith("warn"):
                            self.found.policies.append(SectionPolicy(section.path, "warned", func.file, node.lineno))
                            return
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp):
                # unknown = set(user_config) - set(self._defaults); if unknown: raise
                if isinstance(node.value.op, ast.Sub) and iterates_keys(node.value.left, name):
                    names = {t.id for t in node.targets if isinstance(t, ast.Name)}
                    for test in ast.walk(func.node):
                        if (
                            isinstance(test, ast.If)
                            and {n.id for n in ast.walk(test.test) if isinstance(n, ast.Name)} & names
                            and raises(test.body)
                        ):
                            self.found.policies.append(SectionPolicy(section.path, "rejected", func.file, test.lineno))
                            self._defaults_keys(func, section)
                            return
        self._defaults_keys(func, section)

    def _twin_fields(self, func: Func, section: Section) -> None:
        """Fields of a dataclass of the same name as the class that copies the section (the config object
        is handed to it, and it takes the attributes named like its fields)."""
        if func.owner is None:
            return
        for path, tree in self.trees.items():
            for node in tree.body:
                if not (isinstance(node, ast.ClassDef) and node.name == func.owner.name and node is not func.owner):
                    continue
                if not any(name_of(d) == "dataclass" for d in node.decorator_list):
                    continue
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        default = literal(item.value) if item.value is not None else MISSING
                        self.record(KeyRead(f"{section.path}.{item.target.id}", path, item.lineno, "field", default))

    def _defaults_keys(self, func: Func, section: Section) -> None:
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
                                KeyRead(f"{section.path}.{k.value}", func.file, k.lineno, "defaults", literal(v))
                            )

    # -- calls -----------------------------------------------------------------------------------

    def call(self, scope: Scope, node: ast.Call, status: str) -> Any:
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

    def _kwargs_section(self, func: Func, section: Section, line: int) -> None:
        """`Cls(**section)`: the keyword parameters are the keys; `**kwargs` decides about the rest."""
        args = func.node.args
        named = args.args[1:] if func.owner is not None and not func.is_static else args.args
        defaults = [MISSING] * (len(named) - len(args.defaults)) + list(args.defaults)
        for arg, default in zip(named, defaults):
            value = literal(default) if default is not MISSING else MISSING
            self.record(KeyRead(f"{section.path}.{arg.arg}", func.file, arg.lineno, "kwarg", value))
        for arg, default in zip(args.kwonlyargs, args.kw_defaults):
            self.record(KeyRead(f"{section.path}.{arg.arg}", func.file, arg.lineno, "kwarg", literal(default)))
        if args.kwarg is not None:
            self.found.policies.append(SectionPolicy(section.path, "ignored", func.file, func.node.lineno))
            self._analyze(func, {args.kwarg.arg: section})
        else:
            self.found.policies.append(SectionPolicy(section.path, "rejected", func.file, func.node.lineno))

    def _resolve(self, scope: Scope, target: ast.AST) -> tuple[Func | None, bool] | None:
        name = name_of(target)
        if name is None:
            return None
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            if target.value.id in {"self", "cls"} and scope.func.owner is not None:
                method = method_of(scope.func.owner, name)
                if method is not None:
                    return Func(scope.func.file, method, scope.func.owner), False
        if name in self.classes:
            path, cls = self.classes[name]
            init = method_of(cls, "__init__")
            if init is not None:
                return Func(path, init, cls), True
            return None
        if isinstance(target, ast.Name) and name in self.functions:
            return self.functions[name], False
        return None


def read_additional_config(sources: dict[str, str]) -> Findings:
    """Every `additional_config` key read in `sources` (path -> Python text)."""
    return Analyzer(sources).run()
