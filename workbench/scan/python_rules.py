"""Python rules: one pass over a module's AST (the code is parsed, never imported or run).

Names are followed through imports and simple aliases, so `import torch.cuda as tc; tc.synchronize()`,
`from torch import cuda; cuda.synchronize()` and `from torch.cuda import amp; amp.autocast()` are all
seen as `torch.cuda.*`. Libraries are reported where they are imported (the import itself fails on
Ascend); torch names where they are used (the import works, the call may not). Device, backend and
module strings go through `python_values` (local constant propagation): a value that resolves to
'cuda' is reported, one built at run time from parts the AST cannot see is reported as `unresolved`.
"""

from __future__ import annotations

import ast
import re

from workbench.scan import catalog
from workbench.scan.findings import Hit
from workbench.scan.python_values import StringValues, ValueResolver
from workbench.scan.rule_ids import Rule

_EXCERPT_CHARS = 160
_DEVICE_KWARGS = frozenset({"device", "map_location", "device_map", "device_id", "device_type"})
_AMP_CALLS = frozenset(
    {
        "torch.autocast",
        "torch.amp.autocast",
        "torch.amp.GradScaler",
        "torch.amp.custom_fwd",
        "torch.amp.custom_bwd",
        "torch.amp.autocast_mode.autocast",
        "torch.get_autocast_dtype",
        "torch.is_autocast_enabled",
    }
)
_PROCESS_GROUP_CALLS = frozenset({"init_process_group", "new_group", "new_subgroups", "new_subgroups_by_enumeration"})
_IMPORT_CALLS = frozenset({"importlib.import_module", "importlib.__import__"})
_SPEC_CALLS = frozenset({"importlib.util.find_spec", "pkgutil.find_loader", "importlib.find_loader"})
_CTYPES_CALLS = frozenset(
    {"ctypes.CDLL", "ctypes.PyDLL", "ctypes.cdll.LoadLibrary", "ctypes.util.find_library", "ctypes.LoadLibrary"}
)
_DISPATCH_METHODS = frozenset({"impl", "register_kernel", "custom_op", "define"})
_TRITON_DECORATORS = ("triton.jit", "triton.autotune", "triton.heuristics")
_ATTENTION_ENUMS = frozenset({"AttentionBackendEnum", "_Backend", "AttentionBackend"})
_IMPORT_GUARDS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})
_ENV_NAME = re.compile(r"([A-Z][A-Z0-9_]*)(?:=.*)?", re.S)
_REQUIREMENT = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?:[<>=!~;@ ].*)?", re.S)
_CUDA_LIBRARY_STEMS = frozenset({"cuda", "cudart", "cublas", "cublasLt", "cudnn", "nccl", "nvrtc", "nvidia-ml"})


def _dotted(node: ast.expr) -> str:
    """'a.b.c' for a Name/Attribute chain, '' otherwise (no alias resolution)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _str_constant(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _cuda_fstring(node: ast.JoinedStr) -> bool:
    """f"cuda:{rank}": an f-string whose literal beginning is a CUDA device."""
    head = _str_constant(node.values[0]) if len(node.values) > 1 else None
    return head is not None and re.match(r"cuda(:|$)", head) is not None


def _guards_imports(node: ast.Try) -> bool:
    for handler in node.handlers:
        caught = handler.type
        names = (
            [_dotted(e) for e in caught.elts] if isinstance(caught, ast.Tuple) else [_dotted(caught)] if caught else []
        )
        if caught is None or any(n.split(".")[-1] in _IMPORT_GUARDS for n in names):
            return True
    return False


class _Rules(ast.NodeVisitor):
    """Walks one module and collects `Hit`s; see the module docstring for what it follows."""

    def __init__(self, path: str, lines: list[str], module: ast.Module, npu_names: frozenset[str]) -> None:
        self.path = path
        self.lines = lines
        self.npu_names = npu_names
        self.setup_script = path.endswith("setup.py")
        self.values = ValueResolver(module)
        self.aliases: dict[str, str] = {}
        self.scopes: list[ast.AST] = []  # enclosing functions, innermost last
        self.claimed: set[int] = set()  # literals a more specific rule has reported
        self.hits: list[Hit] = []
        self.optional_imports = 0
        self.type_checking = 0

    # -- traversal (NodeVisitor's, without its per-node getattr and iter_fields: ~2x faster) --------
    def visit(self, node: ast.AST) -> None:
        handler = _HANDLERS.get(type(node))
        if handler is None:
            self.generic_visit(node)
        else:
            handler(self, node)

    def generic_visit(self, node: ast.AST) -> None:
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self.visit(item)
            elif isinstance(value, ast.AST):
                self.visit(value)

    # -- bookkeeping -----------------------------------------------------------------------------
    def hit(self, node: ast.AST, rule: Rule, detail: str = "") -> None:
        line = getattr(node, "lineno", None)
        text = self.lines[line - 1].strip() if line and line <= len(self.lines) else ""
        column = getattr(node, "col_offset", None)
        self.hits.append(
            Hit(self.path, line, None if column is None else column + 1, rule.value, text[:_EXCERPT_CHARS], detail)
        )

    def qualname(self, node: ast.expr) -> str | None:
        """The absolute dotted name of a Name/Attribute chain whose root is an import alias, else None."""
        dotted = _dotted(node)
        if not dotted:
            return None
        root, _, rest = dotted.partition(".")
        base = self.aliases.get(root)
        if base is None:
            return None
        return f"{base}.{rest}" if rest else base

    def resolve(self, expr: ast.expr) -> StringValues:
        return self.values.resolve(expr, tuple(reversed(self.scopes)))

    def learn_imports(self, body: list[ast.stmt]) -> None:
        """Record top-level aliases before the walk, so functions defined above an import resolve too."""
        for stmt in body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self._alias(stmt)
            elif isinstance(stmt, (ast.If, ast.Try)):
                self.learn_imports(stmt.body + stmt.orelse + [s for h in getattr(stmt, "handlers", []) for s in h.body])

    def _alias(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            if isinstance(node, ast.Import):
                if alias.asname:
                    self.aliases[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    self.aliases[root] = root
            elif alias.name != "*":
                base = "." * node.level + (node.module or "")
                self.aliases[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name

    def import_detail(self) -> str:
        if self.type_checking:
            return "TYPE_CHECKING only"
        return "optional import (try/except)" if self.optional_imports else ""

    # -- imports ---------------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        self._alias(node)
        for alias in node.names:
            rule = catalog.module_rule(alias.name)
            if rule is not None:
                self.hit(node, rule, self.import_detail())

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self._alias(node)
        if node.level or not node.module:
            return
        rules: dict[Rule, None] = {}
        for alias in node.names:
            rule = catalog.module_rule(f"{node.module}.{alias.name}") or catalog.module_rule(node.module)
            if rule is not None:
                rules[rule] = None
        for rule in rules:
            self.hit(node, rule, self.import_detail())

    def visit_Try(self, node: ast.Try) -> None:
        guarded = _guards_imports(node)
        self.optional_imports += guarded
        for stmt in node.body:
            self.visit(stmt)
        self.optional_imports -= guarded
        for part in (*node.handlers, *node.orelse, *node.finalbody):
            self.visit(part)

    def visit_If(self, node: ast.If) -> None:
        checking = _dotted(node.test).endswith("TYPE_CHECKING")
        self.visit(node.test)
        self.type_checking += checking
        for stmt in node.body:
            self.visit(stmt)
        self.type_checking -= checking
        for stmt in node.orelse:
            self.visit(stmt)

    # -- scopes ----------------------------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            name = self.qualname(target) or _dotted(target)
            if name.endswith(_TRITON_DECORATORS):
                self.hit(decorator, Rule.TRITON_KERNEL, f"@{name} {node.name}")
                break
        self.scopes.append(node)
        self.generic_visit(node)
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Expr(self, node: ast.Expr) -> None:
        if _str_constant(node.value) is None:  # a docstring or bare string says nothing about the device
            self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        # `tc = torch.cuda`: an alias, so the uses through it resolve too (the line itself is reported)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = self.qualname(node.value) if _dotted(node.value) else None
            if name is not None:
                self.aliases[node.targets[0].id] = name
        self.generic_visit(node)

    # -- names -----------------------------------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "is_cuda" and id(node) not in self.claimed:  # Tensor.is_cuda is a property, not a call
            self.hit(node, Rule.TENSOR_CUDA_METHOD, ".is_cuda")
        owner = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", "")
        if owner in _ATTENTION_ENUMS and catalog.is_cuda_attention_backend(node.attr):
            self.hit(node, Rule.VLLM_ATTENTION_BACKEND, f"{owner}.{node.attr}")
            return
        name = self.qualname(node)
        if name is None:
            self.generic_visit(node)
            return
        rule = catalog.torch_rule(name, self.npu_names)
        if rule is not None:
            self.hit(node, rule, name)

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            return
        name = self.aliases.get(node.id)
        rule = catalog.torch_rule(name, self.npu_names) if name else None
        if rule is not None:
            self.hit(node, rule, f"{node.id} = {name}")

    # -- literals --------------------------------------------------------------------------------
    def visit_Constant(self, node: ast.Constant) -> None:
        text = node.value
        if not isinstance(text, str) or id(node) in self.claimed or len(text) > 400:
            return
        env = _ENV_NAME.fullmatch(text)
        rule = catalog.env_rule(env.group(1)) if env else None
        if rule is not None:
            self.hit(node, rule, env.group(1))
        elif catalog.is_cuda_device(text):
            self.hit(node, Rule.DEVICE_CUDA_STRING, repr(text))
        elif catalog.is_nccl_backend(text):
            self.hit(node, Rule.NCCL_BACKEND, repr(text))
        elif "nvidia-smi" in text:
            self.hit(node, Rule.TOOL_NVIDIA_SMI)
        elif text == "nvcc" or text.startswith("nvcc ") or text.endswith("/nvcc"):
            self.hit(node, Rule.NATIVE_CUDA_BUILD, "nvcc")
        elif "download.pytorch.org/whl/cu" in text or (self.setup_script and re.search(r"\+cu\d+", text)):
            self.hit(node, Rule.DEPS_CUDA_WHEEL)
        elif self.setup_script:
            requirement = _REQUIREMENT.fullmatch(text)
            rule = catalog.package_rule(requirement.group(1)) if requirement else None
            if rule is not None:
                self.hit(node, rule, f"install requirement {text!r}")

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        if _cuda_fstring(node):
            self.claimed.add(id(node.values[0]))
            self.hit(node, Rule.DEVICE_CUDA_STRING, "f-string starting " + repr(node.values[0].value))
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> None:
        for key, value in zip(node.keys, node.values):
            name = _str_constant(key)
            if name is None:
                continue
            if catalog.env_rule(name) is None:
                self.claimed.add(id(key))  # a key named 'cuda' maps something; it is not a device
            rule = catalog.option_rule(name, _str_constant(value))
            if rule is not None and rule is not Rule.DEVICE_CUDA_STRING:
                self.claimed.add(id(value))
                self.hit(value, rule, f"{name}: {ast.unparse(value)[:60]}")
        self.generic_visit(node)

    def visit_List(self, node: ast.List | ast.Tuple) -> None:
        # CLI arguments built in Python: ["--quantization", "awq"] or ["--kv-cache-dtype=fp8"]
        texts = [_str_constant(e) for e in node.elts]
        for index, text in enumerate(texts):
            if not text or not text.startswith("--"):
                continue
            flag, _, value = text.partition("=")
            if not value and index + 1 < len(texts):
                value = texts[index + 1] or ""
            rule = catalog.option_rule(flag, value or None)
            if rule is not None and rule is not Rule.DEVICE_CUDA_STRING:
                self.hit(node.elts[index], rule, f"{flag} {value}".strip())
        self.generic_visit(node)

    visit_Tuple = visit_List

    def visit_Compare(self, node: ast.Compare) -> None:
        if any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
            for operand in (node.left, *node.comparators):
                self._claim_compared(operand)
        self.generic_visit(node)

    def visit_MatchValue(self, node: ast.MatchValue) -> None:
        self._claim_compared(node.value)
        self.generic_visit(node)

    def _claim_compared(self, operand: ast.expr) -> None:
        elements = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
        for element in elements:
            text = _str_constant(element)
            if text is not None and (catalog.is_cuda_device(text) or catalog.is_nccl_backend(text)):
                self.claimed.add(id(element))
                self.hit(element, Rule.DEVICE_STRING_COMPARE, f"compared with {text!r}")

    # -- calls -----------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = self.qualname(func) or ""
        method = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if method == "cuda" and not name.startswith("torch.cuda"):
            self.hit(node, Rule.TENSOR_CUDA_METHOD, ".cuda()")
        elif method == "is_cuda":
            self.claimed.add(id(func))  # platform.is_cuda(): vLLM's platform query, not a tensor's device
        if method in ("startswith", "endswith") and node.args:
            self._claim_compared(node.args[0])
        self._device_arguments(node, name, method)
        self._backend_argument(node, method)
        self._dynamic_import(node, name, method)
        self._native_loading(node, name)
        if method in _DISPATCH_METHODS:
            self._dispatch_key(node)
        self._vllm_keywords(node)
        self.generic_visit(node)

    def _device_arguments(self, node: ast.Call, name: str, method: str) -> None:
        """Device strings passed to torch: literals are reported where written; values assembled or
        built here are resolved, and reported at the call."""
        amp = name in _AMP_CALLS
        exprs = [k.value for k in node.keywords if k.arg in _DEVICE_KWARGS]
        if node.args and (amp or method == "to" or name in ("torch.device", "torch.set_default_device")):
            exprs.append(node.args[0])
        for expr in exprs:
            literal = _str_constant(expr)
            if literal is not None:
                if amp and catalog.is_cuda_device(literal):
                    self.claimed.add(id(expr))
                    self.hit(expr, Rule.AMP_CUDA, f"{name.removeprefix('torch.')}({literal!r})")
                continue
            if not amp and isinstance(expr, ast.JoinedStr) and _cuda_fstring(expr):
                continue  # reported where it is written, by visit_JoinedStr
            self._resolved_device(expr, Rule.AMP_CUDA if amp else Rule.DEVICE_CUDA_STRING)

    def _resolved_device(self, expr: ast.expr, rule: Rule) -> None:
        values = self.resolve(expr)
        cuda = sorted(v for v in values.values | values.prefixes if re.match(r"cuda(:|$)", v))
        shown = ast.unparse(expr)[:60]
        via = f" via {values.via}" if values.via else ""
        if cuda and (values.assembled or values.built):
            self.hit(expr, rule, f"{shown} resolves to {cuda[0]!r}{via}")
        elif values.may_start("cuda"):
            self.hit(expr, Rule.UNRESOLVED_DEVICE, f"device built at run time: {shown}{via}")

    def _backend_argument(self, node: ast.Call, method: str) -> None:
        backend = next((k.value for k in node.keywords if k.arg == "backend"), None)
        if backend is None and method == "init_process_group" and node.args:
            backend = node.args[0]
        if backend is None or _str_constant(backend) is not None:
            return
        values = self.resolve(backend)
        shown = ast.unparse(backend)[:60]
        if any(catalog.is_nccl_backend(v) for v in values.values) and values.assembled:
            self.hit(backend, Rule.NCCL_BACKEND, f"{shown} resolves to 'nccl'")
        elif values.may_start("nccl") and method in _PROCESS_GROUP_CALLS:
            via = f" via {values.via}" if values.via else ""
            self.hit(backend, Rule.UNRESOLVED_BACKEND, f"backend built at run time: {shown}{via}")

    def _dynamic_import(self, node: ast.Call, name: str, method: str) -> None:
        dynamic = name in _IMPORT_CALLS or (isinstance(node.func, ast.Name) and method == "__import__")
        if not (dynamic or name in _SPEC_CALLS) or not node.args:
            return
        values = self.resolve(node.args[0])
        how = "imported at run time" if dynamic else "availability check"
        for module in sorted(values.values):
            rule = catalog.module_rule(module)
            if rule is not None:
                self.hit(node, rule, f"{how}: {module}")
        if dynamic and (values.built or values.opaque):  # any module could be loaded
            self.hit(node, Rule.UNRESOLVED_IMPORT, f"module chosen at run time: {ast.unparse(node.args[0])[:60]}")

    def _native_loading(self, node: ast.Call, name: str) -> None:
        if name in _CTYPES_CALLS and node.args:
            library = _str_constant(node.args[0]) or ""
            if catalog.CUDA_LIBRARY_RE.search(library) or library in _CUDA_LIBRARY_STEMS:
                self.hit(node, Rule.NATIVE_CUDA_BINARY, f"{library} loaded with ctypes")
            return
        if name == "torch.utils.cpp_extension.load_inline":
            sources = next((k.value for k in node.keywords if k.arg == "cuda_sources"), None)
            if sources is not None and not (isinstance(sources, ast.Constant) and sources.value is None):
                self.hit(node, Rule.EXT_CUDA_EXTENSION, "load_inline(cuda_sources=...)")
        elif name == "torch.utils.cpp_extension.load":
            self._extension_sources(node)

    def _extension_sources(self, node: ast.Call) -> None:
        sources = next((k.value for k in node.keywords if k.arg == "sources"), None)
        if sources is None and len(node.args) > 1:
            sources = node.args[1]
        with_cuda = next((k.value for k in node.keywords if k.arg == "with_cuda"), None)
        elements = sources.elts if isinstance(sources, (ast.List, ast.Tuple)) else [sources] if sources else []
        names = [self.resolve(e) for e in elements]
        if any(v.endswith((".cu", ".cuh")) for n in names for v in n.values) or (
            isinstance(with_cuda, ast.Constant) and with_cuda.value is True
        ):
            self.hit(node, Rule.EXT_CUDA_EXTENSION, "cpp_extension.load with CUDA sources")
        elif not elements or any(not n.values for n in names):
            self.hit(node, Rule.EXT_LOAD_LIBRARY, "cpp_extension.load with sources the scan cannot resolve")

    def _dispatch_key(self, node: ast.Call) -> None:
        candidates = list(node.args) + [k.value for k in node.keywords if k.arg in ("dispatch_key", "device_types")]
        for expr in candidates:
            elements = expr.elts if isinstance(expr, (ast.List, ast.Tuple)) else [expr]
            for element in elements:
                text = _str_constant(element)
                if text is not None and text.lower() == "cuda":
                    self.claimed.add(id(element))
                    self.hit(element, Rule.EXT_CUDA_DISPATCH, f"dispatch key {text!r}")

    def _vllm_keywords(self, node: ast.Call) -> None:
        for keyword in node.keywords:
            if keyword.arg is None:
                continue
            rule = catalog.option_rule(keyword.arg, _str_constant(keyword.value))
            if rule is not None and rule is not Rule.DEVICE_CUDA_STRING:
                self.claimed.add(id(keyword.value))
                self.hit(keyword.value, rule, f"{keyword.arg}={ast.unparse(keyword.value)[:60]}")


_HANDLERS = {
    getattr(ast, name.removeprefix("visit_")): method
    for name, method in vars(_Rules).items()
    if name.startswith("visit_") and name != "visit" and hasattr(ast, name.removeprefix("visit_"))
}


def python_hits(path: str, source: bytes | str, npu_names: frozenset[str]) -> list[Hit]:
    """Every hit in one Python module. Raises SyntaxError/ValueError/RecursionError for the caller to
    report as a scan problem."""
    module = ast.parse(source, filename=path)
    text = source.decode("utf-8", errors="replace") if isinstance(source, bytes) else source
    rules = _Rules(path, text.splitlines(), module, npu_names)
    rules.learn_imports(module.body)
    rules.visit(module)
    return rules.hits
