"""Read vllm-ascend's source at a tag from a bare git mirror, parsed once per (commit, file).

    tree = Mirror("/work/.mirror/vllm-project+vllm-ascend/repo").tree("v0.13.0")
    module = tree.module("vllm_ascend/ops/layernorm.py")      # Module: AST + where each name comes from
    module.functions["forward_oot"], module.classes["AscendRMSNorm"].methods["forward_oot"]

Nothing here knows about kernels: it is `git show TAG:PATH` and `ast.parse` with an index of the
top-level names (functions, classes and their methods and bases, imports, simple assignments).
"""

from __future__ import annotations

import ast
import subprocess
from dataclasses import dataclass, field
from pathlib import Path


class MirrorError(RuntimeError):
    """The mirror or a ref in it cannot be read."""


@dataclass(repr=False)
class ClassInfo:
    name: str
    node: ast.ClassDef
    module: Module
    bases: list[ast.expr]
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
    assigns: dict[str, ast.expr]  # class-level NAME = value

    def __repr__(self) -> str:
        return f"<class {self.name} in {self.module.path}>"


@dataclass(repr=False)
class Module:
    path: str
    tree: ParsedTree  # a ref of the mirror, or this checkout
    node: ast.Module
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # alias -> (module, attr | None)
    assigns: dict[str, ast.expr] = field(default_factory=dict)  # NAME = value at module level (last wins)
    mutable: set[str] = field(default_factory=set)  # names some function rebinds (`global NAME`)

    def __repr__(self) -> str:
        return f"<module {self.path}>"

    @property
    def dotted(self) -> str:
        return self.path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def _index(module: Module) -> None:
    package = module.dotted.rsplit(".", 1)[0] if not module.path.endswith("__init__.py") else module.dotted

    def visit(body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                module.functions[stmt.name] = stmt
            elif isinstance(stmt, ast.ClassDef):
                methods = {s.name: s for s in stmt.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
                assigns = {}
                for s in stmt.body:
                    if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
                        assigns[s.targets[0].id] = s.value
                    elif isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is not None:
                        assigns[s.target.id] = s.value
                module.classes[stmt.name] = ClassInfo(stmt.name, stmt, module, list(stmt.bases), methods, assigns)
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.asname:
                        module.imports[alias.asname] = (alias.name, None)
                    else:
                        module.imports[alias.name.split(".")[0]] = (alias.name.split(".")[0], None)
            elif isinstance(stmt, ast.ImportFrom):
                base = stmt.module or ""
                if stmt.level:
                    parts = package.split(".")
                    parent = ".".join(parts[: len(parts) - stmt.level + 1])
                    base = f"{parent}.{base}" if base else parent
                for alias in stmt.names:
                    module.imports[alias.asname or alias.name] = (base, alias.name)
            elif isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    if isinstance(target, ast.Name):
                        module.assigns[target.id] = stmt.value
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                module.assigns[stmt.target.id] = stmt.value
            elif isinstance(stmt, ast.If):
                # `if HAS_TRITON: from ... import f` and try/except imports: index both sides
                visit(stmt.body)
                visit(stmt.orelse)
            elif isinstance(stmt, ast.Try):
                visit(stmt.body)
                for handler in stmt.handlers:
                    visit(handler.body)

    visit(module.node.body)
    for node in ast.walk(module.node):
        if isinstance(node, ast.Global):
            module.mutable.update(node.names)


class ParsedTree:
    """Parsed, indexed modules of a tree that has `files` and `text(path)` (a ref of the mirror, or this
    checkout for our own adapters): one cache, so both sides are walked from the same Modules."""

    def __init__(self) -> None:
        self._modules: dict[str, Module | None] = {}
        self.touched: set[str] = set()  # files read since the caller last cleared it (memo keys)

    files: frozenset[str]

    def text(self, path: str) -> str | None:
        raise NotImplementedError

    def exists(self, path: str) -> bool:
        return path in self.files

    def module(self, path: str) -> Module | None:
        if self.exists(path):
            self.touched.add(path)
        if path not in self._modules:
            text = self.text(path)
            if text is None:
                self._modules[path] = None
            else:
                try:
                    node = ast.parse(text)
                except SyntaxError:
                    self._modules[path] = None
                else:
                    module = Module(path, self, node)
                    _index(module)
                    self._modules[path] = module
        return self._modules[path]

    def module_by_name(self, dotted: str) -> Module | None:
        """'vllm_ascend.ops.layernorm' -> its Module (a .py file or a package __init__.py), else None."""
        base = dotted.replace(".", "/")
        for path in (f"{base}.py", f"{base}/__init__.py"):
            if self.exists(path):
                return self.module(path)
        return None


class Tree(ParsedTree):
    """The source of one ref (tag, branch or commit)."""

    def __init__(self, mirror: Mirror, ref: str) -> None:
        self.mirror = mirror
        self.ref = ref
        self.commit = mirror.commit(ref)
        self._files: frozenset[str] | None = None
        self._blobs: dict[str, str] | None = None
        super().__init__()

    @property
    def files(self) -> frozenset[str]:
        if self._files is None:
            self._files = self.mirror.files(self.commit)
        return self._files

    @property
    def blobs(self) -> dict[str, str]:
        """path -> blob id: two refs with the same blobs for the files a walk read give the same walk."""
        if self._blobs is None:
            self._blobs = self.mirror.blobs(self.commit)
        return self._blobs

    def text(self, path: str) -> str | None:
        if not self.exists(path):
            return None
        self.touched.add(path)
        return self.mirror.text(self.commit, path)

    def grep(self, needle: str, prefix: str = "vllm_ascend/") -> list[str]:
        """Python files under `prefix` whose text contains `needle` (plain substring)."""
        found = [p for p in self.mirror.grep(self.commit, needle, prefix) if p.endswith(".py")]
        self.touched.update(found)
        return found


class Mirror:
    """A bare git directory of github.com/vllm-project/vllm-ascend (the `fetch` tool's mirror, or any clone)."""

    def __init__(self, git_dir: str | Path) -> None:
        self.git_dir = Path(git_dir)
        if not (self.git_dir / "HEAD").is_file() and not (self.git_dir / ".git").exists():
            raise MirrorError(
                f"{self.git_dir}: not a git directory; pass --mirror with a clone of "
                "https://github.com/vllm-project/vllm-ascend (bare or not)"
            )
        self._trees: dict[str, Tree] = {}
        self._commits: dict[str, str] = {}
        self._texts: dict[tuple[str, str], str] = {}
        self._greps: dict[tuple[str, str, str], list[str]] = {}

    def _git(self, *args: str) -> str:
        result = subprocess.run(
            ["git", "--git-dir", str(self._git_path()), *args], capture_output=True, text=True, errors="replace"
        )
        if result.returncode != 0:
            raise MirrorError(f"git {' '.join(args)} in {self.git_dir}: {result.stderr.strip()}")
        return result.stdout

    def _git_path(self) -> Path:
        dot = self.git_dir / ".git"
        return dot if dot.is_dir() else self.git_dir

    def commit(self, ref: str) -> str:
        if ref in self._commits:
            return self._commits[ref]
        try:
            self._commits[ref] = self._git("rev-parse", f"{ref}^{{commit}}").strip()
            return self._commits[ref]
        except MirrorError:
            raise MirrorError(
                f"{self.git_dir}: no ref {ref!r}; fetch the tags (git fetch --tags) or refresh the mirror"
            ) from None

    def files(self, commit: str) -> frozenset[str]:
        return frozenset(self._git("ls-tree", "-r", "--name-only", commit).splitlines())

    def blobs(self, commit: str) -> dict[str, str]:
        out = {}
        for line in self._git("ls-tree", "-r", commit).splitlines():
            meta, _, path = line.partition("\t")
            out[path] = meta.split()[2]
        return out

    def text(self, commit: str, path: str) -> str:
        key = (commit, path)
        if key not in self._texts:
            self._texts[key] = self._git("show", f"{commit}:{path}")
        return self._texts[key]

    def grep(self, commit: str, needle: str, prefix: str) -> list[str]:
        """Files under `prefix` containing `needle` (git grep, fixed string), paths without the commit."""
        key = (commit, needle, prefix)
        if key in self._greps:
            return self._greps[key]
        result = subprocess.run(
            ["git", "--git-dir", str(self._git_path()), "grep", "-l", "-F", needle, commit, "--", prefix],
            capture_output=True,
            text=True,
            errors="replace",
        )
        self._greps[key] = sorted(line.split(":", 1)[1] for line in result.stdout.splitlines() if ":" in line)
        return self._greps[key]

    def tree(self, ref: str) -> Tree:
        if ref not in self._trees:
            self._trees[ref] = Tree(self, ref)
        return self._trees[ref]

    def tags(self) -> list[str]:
        return self._git("tag").split()
