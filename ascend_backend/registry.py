"""Op registry: op name -> implementations per backend, one choice per (op, device), fallbacks logged.

Every op of the backend (norms, activations, rotary, linear, attention kernels) is a plain function
that calls `REGISTRY.dispatch(name, device, ...)`. The registry:

- holds up to three implementations per op: `native` (PyTorch; runs everywhere and is the accuracy
  reference), `npu` (a torch_npu kernel) and `cuda`;
- chooses once per (op, device kind) from availability and policy, and caches the choice, like
  vLLM's CustomOp picks its forward at construction rather than per call;
- lets a user force the native path for some ops or all (API, or ASCEND_BACKEND_FORCE_NATIVE), the
  first experiment when an NPU kernel is suspected;
- logs each fallback once with its reason, counts calls per implementation, and can inject faults
  (NaN, Inf, zeros, scale, noise) into one op, one call or one module — the fixture every debugging
  tool of the workbench is tested against.

Why a process-wide instance (`REGISTRY`): dispatch tables are process state by nature (torch.library
and vLLM's CustomOp registry are too); the instance is built once at import and everything that
mutates it is an explicit method, scoped by a context manager where it is temporary.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import fnmatch
import json
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from ascend_backend import envs
from ascend_backend.device import DeviceKind, kind_of, npu_status
from ascend_backend.faults import FaultKind, FaultSpec, corrupt, parse_fault_specs

if TYPE_CHECKING:
    import pandas as pd

logger = logging.getLogger("ascend_backend.registry")


class Backend(str, enum.Enum):
    NATIVE = "native"
    NPU = "npu"
    CUDA = "cuda"


# Which accelerated backend belongs to a device kind; native runs on all of them.
_ACCELERATED = {DeviceKind.NPU: Backend.NPU, DeviceKind.CUDA: Backend.CUDA}


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
    def __init__(self) -> None:
        self._ops: dict[str, OpEntry] = {}
        self._overrides: dict[str, Backend] = {}
        self._choices: dict[tuple[str, DeviceKind], Selection] = {}
        self._calls: Counter[tuple[str, Backend]] = Counter()
        self._faulted: Counter[str] = Counter()
        self._call_fallbacks: set[tuple[str, Backend, str]] = set()
        self._faults: list[FaultHandle] = []

    # ----------------------------------------------------------------- registration
    def register(
        self,
        op: str,
        backend: Backend,
        *,
        doc: str = "",
        supports: Callable[..., str | None] | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: `@REGISTRY.register("rms_norm", Backend.NPU)` on an implementation."""

        def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
            entry = self._ops.setdefault(op, OpEntry(op, doc))
            if doc and not entry.doc:
                self._ops[op] = entry = OpEntry(op, doc, entry.impls, entry.supports)
            if backend in entry.impls:
                raise ValueError(f"op {op!r} already has a {backend.value} implementation")
            entry.impls[backend] = fn
            if supports is not None:
                entry.supports[backend] = supports
            self._choices.clear()
            return fn

        return decorator

    def ops(self) -> list[str]:
        return sorted(self._ops)

    def entry(self, op: str) -> OpEntry:
        try:
            return self._ops[op]
        except KeyError:
            raise UnknownOpError(
                f"unknown op {op!r}; known ops: {', '.join(self.ops())}"
            ) from None

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
        if accelerated is None:
            return Selection(op, kind, Backend.NATIVE, self._cpu_reason(entry))
        if accelerated not in entry.impls:
            return Selection(
                op, kind, Backend.NATIVE,
                f"no {accelerated.value} kernel registered; native PyTorch runs on {kind.value}",
            )
        if accelerated is Backend.NPU and not npu_status().available:
            status = npu_status()
            return Selection(op, kind, Backend.NATIVE, f"npu kernel unusable: {status.kind.value} ({status.detail})")
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
        self._choices.clear()

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
        selection = self.select(op, device)
        backend = selection.backend
        entry = self._ops[op]
        guard = entry.supports.get(backend)
        if guard is not None:
            why = guard(*args, **kwargs)
            if why is not None:
                self._log_call_fallback(op, backend, why)
                backend = Backend.NATIVE
        self._calls[(op, backend)] += 1
        out = entry.impls[backend](*args, **kwargs)
        if self._faults:
            out = self._apply_faults(op, out)
        return out

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
        """Table (op, chosen, available, registered, reason, calls, faulted) for `device` (default: detected)."""
        import pandas as pd

        from ascend_backend.device import detect

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
        return pd.DataFrame(rows, columns=["op", "chosen", "available", "registered", "reason", "calls", "faulted"])


REGISTRY = OpRegistry()

# Module-level conveniences: the registry's verbs without spelling REGISTRY.
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
    "Backend", "FaultKind", "FaultSpec", "OpRegistry", "REGISTRY", "Selection", "UnknownOpError",
    "attach_module_names", "current_module", "describe", "dispatch", "forced_native", "inject",
    "module_scope", "override", "register", "reset_stats", "select", "stats",
]
