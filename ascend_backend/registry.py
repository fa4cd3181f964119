"""Op registry: op name -> implementations per backend, one choice per (op, device), fallbacks logged.

Every op of the backend (norms, activations, rotary, linear, attention kernels) is declared once, as a
typed function without a body (`@REGISTRY.declare`, see `ascend_backend.signatures`); the declaration
becomes the op's public function, which calls `REGISTRY.dispatch(name, device, ...)` with every argument.
The registry:

- holds up to four implementations per op: `native` (PyTorch; runs everywhere and is the accuracy
  reference), `npu` (a torch_npu kernel), `cuda`, and `vllm_cpu` (a compiled CPU kernel of the vLLM
  engine hosting the process: only the vLLM plugin registers these, inside a vLLM CPU server);
- keeps linked ops on one backend: ops that share a data layout (a KV cache written by one and read
  by the other) are never split between a kernel and the native path;
- chooses once per (op, device kind) from availability and policy, and caches the choice, like
  vLLM's CustomOp picks its forward at construction rather than per call;
- lets a user force the native path for some ops or all (API, or ASCEND_BACKEND_FORCE_NATIVE), the
  first experiment when an NPU kernel is suspected;
- logs each fallback once with its reason, counts calls per implementation, and can inject faults
  (NaN, Inf, zeros, scale, noise) into one op, one call or one module — the fixture every debugging
  tool of the workbench is tested against.

Which torch_npu kernel an NPU implementation calls is not the registry's choice: the adapter asks the
kernel-selection table (`ascend_backend.platform.kernels`) per call, and its `supports` guard sends the call to
native where the table says vllm-ascend runs no torch_npu kernel. `describe()` shows that choice next to
the backend (`npu_kernel`, `kernel_row`), so "npu" always comes with the kernel and the row that chose it.

Why a process-wide instance (`REGISTRY`): dispatch tables are process state by nature (torch.library
and vLLM's CustomOp registry are too); the instance is built once at import and everything that
mutates it is an explicit method, scoped by a context manager where it is temporary. It loads the
built-in ops itself, the first time it is asked anything about its table (`load_builtin_ops`), so no
caller has to import the right modules first, and importing `ascend_backend` alone stays cheap.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import fnmatch
import importlib
import json
import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from ascend_backend import envs
from ascend_backend.faults import FaultKind, FaultSpec, corrupt, parse_fault_specs
from ascend_backend.platform.device import kind_of, npu_status
from ascend_backend.platform.kinds import DeviceKind
from ascend_backend.signatures import OpSignature

if TYPE_CHECKING:
    import pandas as pd

logger = logging.getLogger("ascend_backend.registry")


class Backend(str, enum.Enum):
    NATIVE = "native"
    NPU = "npu"
    CUDA = "cuda"
    VLLM_CPU = "vllm_cpu"


# Which accelerated backend belongs to a device kind; native runs on all of them. On CPU the only
# kernels besides native are those of a vLLM CPU engine, registered by the plugin in that engine.
_ACCELERATED = {DeviceKind.NPU: Backend.NPU, DeviceKind.CUDA: Backend.CUDA, DeviceKind.CPU: Backend.VLLM_CPU}


def _device_key(device: torch.device | str) -> str:
    """Cheap cache key for a device: its type for torch.device (what selection depends on), else the text."""
    return device.type if isinstance(device, torch.device) else str(device)


class UnknownOpError(KeyError):
    """An op name the registry does not know; the message lists the known ones."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it readable
        return str(self.args[0])


@dataclass(frozen=True)
class Selection:
    op: str
    device: DeviceKind
    backend: Backend
    reason: str


@dataclass(frozen=True)
class OpEntry:
    name: str
    doc: str
    impls: dict[Backend, Callable[..., Any]] = field(default_factory=dict)
    # Per-call guard for accelerated kernels: returns why these arguments are unsupported, or None.
    supports: dict[Backend, Callable[..., str | None]] = field(default_factory=dict)


@dataclass
class FaultHandle:
    """An armed fault; `fired` counts how many calls it corrupted, `seen` how many matched so far."""

    spec: FaultSpec
    seen: int = 0
    fired: int = 0

    def should_fire(self) -> bool:
        self.seen += 1
        return self.spec.call is None or self.seen == self.spec.call


_MODULE_STACK: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "ascend_backend_module_stack", default=()
)


def current_module() -> str | None:
    """Innermost named module currently running (set by module_scope / attach_module_names)."""
    stack = _MODULE_STACK.get()
    return stack[-1] if stack else None


@contextlib.contextmanager
def module_scope(name: str) -> Iterator[None]:
    """Mark ops called inside as belonging to module `name` (for module-limited fault injection)."""
    token = _MODULE_STACK.set(_MODULE_STACK.get() + (name,))
    try:
        yield
    finally:
        _MODULE_STACK.reset(token)


def attach_module_names(model: torch.nn.Module, prefix: str = "") -> list[Any]:
    """Hook every submodule so ops inside it see its qualified name; returns the hook handles."""
    handles = []
    for name, module in model.named_modules(prefix=prefix.rstrip(".")):
        if not name:
            continue

        def enter(_mod: torch.nn.Module, _args: Any, _name: str = name) -> None:
            _MODULE_STACK.set(_MODULE_STACK.get() + (_name,))

        def leave(_mod: torch.nn.Module, _args: Any, _out: Any) -> None:
            _MODULE_STACK.set(_MODULE_STACK.get()[:-1])

        handles.append(module.register_forward_pre_hook(enter))
        handles.append(module.register_forward_hook(leave))
    return handles


class OpRegistry:
    def __init__(self, builtin_modules: tuple[str, ...] = ()) -> None:
        """`builtin_modules` declare and implement the registry's own ops: imported on first use."""
        self._builtin_modules = builtin_modules
        self._builtins_loaded = not builtin_modules
        self._builtins_loading = False
        self._builtins_lock = threading.RLock()
        self._ops: dict[str, OpEntry] = {}
        self._overrides: dict[str, Backend] = {}
        self._choices: dict[tuple[str, DeviceKind], Selection] = {}
        # dispatch's fast path: (op, device type) -> (backend, implementation, per-call guard). Inside a
        # serving engine every layer dispatches several ops per step, so a call must cost little more
        # than the implementation itself.
        self._routes: dict[tuple[str, str], tuple[Backend, Callable[..., Any], Callable[..., str | None] | None]] = {}
        self._calls: Counter[tuple[str, Backend]] = Counter()
        self._faulted: Counter[str] = Counter()
        self._call_fallbacks: set[tuple[str, Backend, str]] = set()
        self._faults: list[FaultHandle] = []
        self._links: dict[str, frozenset[str]] = {}
        self._signatures: dict[str, OpSignature] = {}

    def load_builtin_ops(self) -> None:
        """Import the modules of the built-in ops, once (idempotent and thread-safe).

        Every query of the table (`entry`, `ops`, `select`, `describe`, a first `dispatch`) calls this, so
        importing one op module, or the package alone, never leaves the table incomplete. A module being
        imported by this very call may query the registry (an NPU adapter asks for its op's declaration):
        the re-entrant lock lets it through, and the flag keeps it from importing again.
        """
        if self._builtins_loaded:
            return
        with self._builtins_lock:
            if self._builtins_loaded or self._builtins_loading:
                return
            self._builtins_loading = True
            try:
                for module in self._builtin_modules:
                    importlib.import_module(module)
                self._builtins_loaded = True
            finally:
                self._builtins_loading = False

    def _forget_choices(self) -> None:
        self._choices.clear()
        self._routes.clear()

    # ----------------------------------------------------------------- declaration and registration
    def declare(
        self, declaration: Callable[..., Any] | None = None, *, device: str | None = None, name: str | None = None
    ) -> Callable[..., Any]:
        """Decorator on an op's declaration (typed parameters, docstring, no body); returns the op's function.

        `@REGISTRY.declare` or `@REGISTRY.declare(device="query")`: the call runs where that parameter's
        tensor lives (default: the first parameter). The op's name is the function's, or `name`.
        """

        def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
            signature = OpSignature.of(name or fn.__name__, fn, device)
            op = signature.op
            if op in self._signatures:
                raise ValueError(f"op {op!r} is declared twice: {self._signatures[op].where} and {signature.where}")
            entry = self._ops.setdefault(op, OpEntry(op, signature.doc))
            for backend, impl in entry.impls.items():
                signature.check(impl, f"the {backend.value} implementation")
            if not entry.doc:
                self._ops[op] = OpEntry(op, signature.doc, entry.impls, entry.supports)
            self._signatures[op] = signature
            return signature.public_function(self.dispatch)

        return decorator if declaration is None else decorator(declaration)

    def signature(self, op: str) -> OpSignature:
        """The op's declaration (its parameters, device parameter and doc)."""
        if op not in self._signatures:  # an adapter asks for a declaration its module has just imported
            self.entry(op)
        if op not in self._signatures:
            raise UnknownOpError(f"op {op!r} has implementations but no declaration (REGISTRY.declare)")
        return self._signatures[op]

    def register(
        self,
        op: str,
        backend: Backend,
        *,
        doc: str = "",
        supports: Callable[..., str | None] | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: `@REGISTRY.register("rms_norm", Backend.NPU)` on an implementation.

        A declared op's implementation takes exactly its declared parameters, in order, without defaults of
        its own (the op's function passes every argument); a mismatch raises TypeError here.
        """

        def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
            if op in self._signatures:
                self._signatures[op].check(
                    fn, f"the {backend.value} implementation {getattr(fn, '__qualname__', fn)!s}"
                )
            entry = self._ops.setdefault(op, OpEntry(op, doc))
            if doc and not entry.doc:
                self._ops[op] = entry = OpEntry(op, doc, entry.impls, entry.supports)
            if backend in entry.impls:
                raise ValueError(f"op {op!r} already has a {backend.value} implementation")
            entry.impls[backend] = fn
            if supports is not None:
                entry.supports[backend] = supports
            self._forget_choices()
            return fn

        return decorator

    def unregister(self, op: str, backend: Backend) -> None:
        """Remove one implementation (never native); a no-op when it is not registered."""
        if backend is Backend.NATIVE:
            raise ValueError(f"op {op!r}: the native implementation is the reference and cannot be removed")
        entry = self.entry(op)
        entry.impls.pop(backend, None)
        entry.supports.pop(backend, None)
        self._forget_choices()

    def link(self, *ops: str) -> None:
        """Keep `ops` on one backend: where any of them would run native, all of them do.

        For ops that share a data layout, e.g. a cache write and the attention reading that cache: a
        kernel's cache layout may differ from native's, so forcing only one of them native must not
        leave the other reading a cache it cannot parse. Names need not be registered yet.
        """
        group = frozenset(ops)
        for op in ops:
            self._links[op] = self._links.get(op, frozenset()) | group
        self._forget_choices()

    def ops(self) -> list[str]:
        self.load_builtin_ops()
        return sorted(self._ops)

    def entry(self, op: str) -> OpEntry:
        self.load_builtin_ops()
        try:
            return self._ops[op]
        except KeyError:
            raise UnknownOpError(f"unknown op {op!r}; known ops: {', '.join(self.ops())}") from None

    def impl(self, op: str, backend: Backend) -> Callable[..., Any]:
        """One implementation, bypassing selection (the op suite runs native as its reference)."""
        impls = self.entry(op).impls
        if backend not in impls:
            raise KeyError(f"op {op!r} has no {backend.value} implementation (has: {[b.value for b in impls]})")
        return impls[backend]

    # ----------------------------------------------------------------- selection
    def select(self, op: str, device: DeviceKind | torch.device | str) -> Selection:
        kind = device if isinstance(device, DeviceKind) else kind_of(device)
        key = (op, kind)
        if key not in self._choices:
            self._choices[key] = choice = self._choose(op, kind)
            if choice.backend is Backend.NATIVE and kind is not DeviceKind.CPU:
                logger.info("op %s on %s falls back to native: %s", op, kind.value, choice.reason)
        return self._choices[key]

    def _choose(self, op: str, kind: DeviceKind) -> Selection:
        own = self._choose_alone(op, kind)
        if own.backend is Backend.NATIVE:
            return own
        for partner in sorted(self._links.get(op, frozenset()) - {op}):
            if partner not in self._ops:
                continue
            theirs = self._choose_alone(partner, kind)
            if theirs.backend is not own.backend:
                return Selection(
                    op,
                    kind,
                    Backend.NATIVE,
                    f"linked to {partner}, which runs {theirs.backend.value} ({theirs.reason}); linked ops share "
                    f"a data layout and run on one backend",
                )
        return own

    def _choose_alone(self, op: str, kind: DeviceKind) -> Selection:
        entry = self.entry(op)
        forced = envs.ASCEND_BACKEND_FORCE_NATIVE
        if "*" in forced or op in forced:
            return Selection(op, kind, Backend.NATIVE, "forced native by ASCEND_BACKEND_FORCE_NATIVE")
        override = self._overrides.get(op) or self._overrides.get("*")
        if override is Backend.NATIVE:
            return Selection(op, kind, Backend.NATIVE, "forced native by registry.override()")
        accelerated = _ACCELERATED.get(kind)
        if override is not None and override is not accelerated:
            raise ValueError(f"override {override.value} for op {op!r} cannot run on {kind.value} tensors")
        if accelerated is None or (kind is DeviceKind.CPU and accelerated not in entry.impls):
            return Selection(op, kind, Backend.NATIVE, self._cpu_reason(entry))
        if accelerated not in entry.impls:
            return Selection(
                op,
                kind,
                Backend.NATIVE,
                f"no {accelerated.value} kernel registered; native PyTorch runs on {kind.value}",
            )
        if accelerated is Backend.NPU and not npu_status().available:
            status = npu_status()
            return Selection(op, kind, Backend.NATIVE, f"npu kernel unusable: {status.kind.value} ({status.detail})")
        if accelerated is Backend.VLLM_CPU:
            return Selection(op, kind, accelerated, "vLLM's CPU kernel (registered by the vLLM plugin in this engine)")
        return Selection(op, kind, accelerated, f"{accelerated.value} kernel")

    @staticmethod
    def _cpu_reason(entry: OpEntry) -> str:
        if Backend.NPU not in entry.impls:
            return "cpu tensors; native is the only implementation"
        status = npu_status()
        return f"cpu tensors; npu kernel not usable here: {status.kind.value} ({status.detail})"

    def override(self, op: str, backend: Backend | None) -> None:
        """Pin `op` ('*' = all ops) to a backend; None removes the pin. Selections are recomputed."""
        if op != "*":
            self.entry(op)
        if backend is None:
            self._overrides.pop(op, None)
        else:
            self._overrides[op] = backend
        self._forget_choices()

    @contextlib.contextmanager
    def forced_native(self, *ops: str) -> Iterator[None]:
        """Run the block with the given ops (or all, when none are named) on the native path."""
        names = ops or ("*",)
        saved = {name: self._overrides.get(name) for name in names}
        for name in names:
            self.override(name, Backend.NATIVE)
        try:
            yield
        finally:
            for name, previous in saved.items():
                self.override(name, previous)

    # ----------------------------------------------------------------- dispatch
    def dispatch(self, op: str, device: torch.device | str, *args: Any, **kwargs: Any) -> Any:
        """Run `op` with the implementation chosen for `device`; count it; apply armed faults."""
        route = self._routes.get((op, _device_key(device)))
        if route is None:
            route = self._route(op, device)
        backend, fn, guard = route
        if guard is not None:
            why = guard(*args, **kwargs)
            if why is not None:
                self._log_call_fallback(op, backend, why)
                backend, fn = Backend.NATIVE, self._ops[op].impls[Backend.NATIVE]
        self._calls[(op, backend)] += 1
        out = fn(*args, **kwargs)
        if self._faults:
            out = self._apply_faults(op, out)
        return out

    def _route(self, op: str, device: torch.device | str) -> tuple[Backend, Callable[..., Any], Any]:
        backend = self.select(op, device).backend
        entry = self._ops[op]
        route = (backend, entry.impls[backend], entry.supports.get(backend))
        self._routes[(op, _device_key(device))] = route
        return route

    def _log_call_fallback(self, op: str, backend: Backend, why: str) -> None:
        key = (op, backend, why)
        if key not in self._call_fallbacks:
            self._call_fallbacks.add(key)
            logger.warning("op %s: %s kernel does not support this call (%s); using native", op, backend.value, why)

    # ----------------------------------------------------------------- faults
    @contextlib.contextmanager
    def inject(
        self,
        op: str,
        fault: str | FaultKind = FaultKind.NAN,
        *,
        call: int | None = None,
        module: str | None = None,
        factor: float = 1.01,
        std: float = 0.01,
        seed: int = 0,
    ) -> Iterator[FaultHandle]:
        """Corrupt `op`'s output inside the block: every call, only the `call`-th, or only in `module`.

        with REGISTRY.inject("rms_norm", fault="nan", module="model.layers.2.input_layernorm") as f:
            model(x)
        assert f.fired == 1
        """
        self.entry(op)
        handle = self.arm(FaultSpec(op, FaultKind(fault), call, module, factor, std, seed))
        try:
            yield handle
        finally:
            self._faults.remove(handle)

    def arm(self, spec: FaultSpec) -> FaultHandle:
        """Arm a fault until `disarm`; `inject` is the scoped form. Used for ASCEND_BACKEND_FAULT."""
        self.entry(spec.op)
        handle = FaultHandle(spec)
        self._faults.append(handle)
        return handle

    def disarm(self, handle: FaultHandle) -> None:
        self._faults.remove(handle)

    def arm_from_env(self) -> list[FaultHandle]:
        """Arm the faults named in ASCEND_BACKEND_FAULT (a server's worker processes call this)."""
        return [self.arm(spec) for spec in parse_fault_specs(envs.ASCEND_BACKEND_FAULT)]

    def _apply_faults(self, op: str, out: Any) -> Any:
        module = current_module()
        for handle in self._faults:
            spec = handle.spec
            if spec.op != op:
                continue
            if spec.module is not None and (module is None or not fnmatch.fnmatchcase(module, spec.module)):
                continue
            if out is None and spec.kind is not FaultKind.RAISE:
                continue  # in-place ops (reshape_and_cache) return nothing to corrupt; only `raise` applies
            if not handle.should_fire():
                continue
            handle.fired += 1
            self._faulted[op] += 1
            # Ops returning (out, residual) get the fault on `out`: the value the next layer consumes.
            if isinstance(out, tuple):
                out = (corrupt(out[0], spec),) + out[1:]
            else:
                out = corrupt(out, spec)
        return out

    # ----------------------------------------------------------------- statistics
    def stats(self) -> dict[str, dict[str, int]]:
        """{op: {backend: calls, ..., 'faulted': n}} for ops that were called."""
        result: dict[str, dict[str, int]] = {}
        for (op, backend), count in self._calls.items():
            result.setdefault(op, {})[backend.value] = count
        for op, count in self._faulted.items():
            result.setdefault(op, {})["faulted"] = count
        return result

    def op_calls(self) -> Counter[str]:
        """Calls per op so far, all backends together (cheap: the engine recorder reads it around each module)."""
        totals: Counter[str] = Counter()
        for (op, _backend), count in self._calls.items():
            totals[op] += count
        return totals

    def reset_stats(self) -> None:
        self._calls.clear()
        self._faulted.clear()

    def write_stats(self, path: str | os.PathLike[str]) -> None:
        """Write stats() as JSON (atomically: a reader never sees half a file)."""
        tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"pid": os.getpid(), "stats": self.stats()}, fh, indent=1, sort_keys=True)
        os.replace(tmp, path)

    def describe(self, device: DeviceKind | torch.device | str | None = None) -> pd.DataFrame:
        """Table (op, chosen, available, registered, reason, calls, faulted, npu_kernel, kernel_row) for
        `device` (default: detected). The last two are the kernel-selection table's choice for an NPU on this
        stack (ascend_backend.platform.kernels), shown on every device so a CPU machine can say what an NPU would run."""
        import pandas as pd

        from ascend_backend.platform import kernels
        from ascend_backend.platform.device import detect

        kind = detect().kind if device is None else (device if isinstance(device, DeviceKind) else kind_of(device))
        rows = []
        for name in self.ops():
            entry = self._ops[name]
            choice = self.select(name, kind)
            usable = [Backend.NATIVE.value]
            accelerated = _ACCELERATED.get(kind)
            if accelerated in entry.impls and not (accelerated is Backend.NPU and not npu_status().available):
                usable.append(accelerated.value)
            rows.append(
                {
                    "op": name,
                    "chosen": choice.backend.value,
                    "available": ", ".join(usable),
                    "registered": ", ".join(b.value for b in Backend if b in entry.impls),
                    "reason": choice.reason,
                    "calls": sum(c for (o, _), c in self._calls.items() if o == name),
                    "faulted": self._faulted.get(name, 0),
                }
            )
            # Ops outside the table (linear, quantized matmuls) run aten/their own kernels on every release.
            rows[-1]["npu_kernel"], rows[-1]["kernel_row"] = (
                kernels.explain(name) if name in kernels.RECIPES else ("-", "-")
            )
        columns = ["op", "chosen", "available", "registered", "reason", "calls", "faulted", "npu_kernel", "kernel_row"]
        return pd.DataFrame(rows, columns=columns)


# The modules that declare the built-in ops and register their implementations: the native references,
# then the NPU adapters (each adapter module imports the module that declares its ops).
BUILTIN_OP_MODULES = (
    "ascend_backend.ops",
    "ascend_backend.attention",
    "ascend_backend.quantization.ops",
    "ascend_backend.npu.adapters",
)
REGISTRY = OpRegistry(BUILTIN_OP_MODULES)

# Module-level conveniences: the registry's verbs without spelling REGISTRY.
declare = REGISTRY.declare
register = REGISTRY.register
dispatch = REGISTRY.dispatch
select = REGISTRY.select
override = REGISTRY.override
forced_native = REGISTRY.forced_native
inject = REGISTRY.inject
stats = REGISTRY.stats
reset_stats = REGISTRY.reset_stats
describe = REGISTRY.describe

__all__ = [
    "Backend",
    "FaultKind",
    "FaultSpec",
    "OpRegistry",
    "REGISTRY",
    "Selection",
    "UnknownOpError",
    "attach_module_names",
    "current_module",
    "declare",
    "describe",
    "dispatch",
    "forced_native",
    "inject",
    "module_scope",
    "override",
    "register",
    "reset_stats",
    "select",
    "stats",
]
