"""The device probe: npu, cuda or cpu — and the one module that imports `torch_npu`.

Why one module: on a machine without CANN an installed torch_npu breaks imports in surprising places
(torch's backend autoload imports it inside `import torch`). Keeping the import here means the
failure is caught once, classified, and kept as a reason the environment checks and notebooks can
show ("libascendcl.so missing: CANN's set_env.sh was not sourced"; "libascend_hal.so missing: the driver
is not mounted"), instead of a traceback. When torch's own autoload tried torch_npu first, the failure it
met is the evidence (`ascend_backend.platform.autoload`, installed by `import ascend_backend`, keeps
`import torch` alive and records it); the probe classifies that text and never imports torch_npu twice.

NNAL/ATB is checked separately (`atb_status()`): op-plugin loads its ATB kernels (`torch_npu._npu_*`, the
cache write and paged attention of most vllm-ascend releases) lazily, so `import torch_npu` succeeds
without NNAL and the failure would only surface at the first attention call of a serving engine.
`atb_status()` triggers that load up front and classifies its error as ATB_MISSING with the fix.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import re
from dataclasses import dataclass
from types import ModuleType

import torch

from ascend_backend import envs
from ascend_backend.platform import autoload
from ascend_backend.platform.kinds import DeviceKind, NpuStatus, NpuUnavailable

ATB_FIX = (
    "install the NNAL package matching your CANN version and source /usr/local/Ascend/nnal/atb/set_env.sh "
    "in the shell that starts Python (NNAL's version must match CANN's and torch_npu's)"
)
# op-plugin's own words when libop_plugin_atb.so cannot load (op_plugin/python/atb/_atb_ops.py, 7.0.0..master):
# "Please check that the nnal package is installed" (libatb.so missing) or "Please check the version of the
# NNAL package" (undefined symbol); a bare libatb.so / libop_plugin_atb.so loader error means the same.
_NNAL_MESSAGE = re.compile(
    r"check (that )?the nnal package|check the version of the nnal|lib(op_plugin_)?atb\.so", re.I
)
_CANN_LIBS = re.compile(r"lib(ascendcl|hccl|opapi|ge_runner|runtime|acl_op_compiler|nnopbase)\w*\.so")
# The driver's user-space library (/usr/local/Ascend/driver/lib64/driver): missing when a container runs
# without the driver mounted (vllm-ascend #1440: "libascend_hal.so: cannot open shared object file" then
# torch's "Failed to load the backend extension: torch_npu"; DeepLink-org/dlinfer #47, a docker build).
_DRIVER_LIBS = re.compile(r"libascend_hal\w*\.so")
CANN_FIX = (
    "source /usr/local/Ascend/ascend-toolkit/set_env.sh (or $ASCEND_HOME_PATH/set_env.sh) in the shell that "
    "starts Python; in containers also mount /usr/local/Ascend/driver"
)
DRIVER_FIX = (
    "mount the Ascend driver into the container (-v /usr/local/Ascend/driver:/usr/local/Ascend/driver and the "
    "devices /dev/davinci*, /dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc), then source CANN's set_env.sh, "
    "which puts the driver's lib64 on LD_LIBRARY_PATH; on a bare host install the driver (`npu-smi info` lists the "
    "cards when it works)"
)


def classify_npu_import_error(text: str) -> NpuStatus:
    """Map the text of a failed `import torch_npu` to a cause and a fix.

    Signatures come from real reports (tests/fixtures/ascend/error_*.txt): a missing CANN shared library
    means set_env.sh was not sourced; a missing libascend_hal.so means the driver is not there (a container
    started without the driver mounted); an undefined `atb::` symbol means NNAL/ATB is absent or
    from another CANN; an undefined `c10::` symbol or a version complaint means torch_npu was built for a
    different torch.
    """
    last = text.strip().splitlines()[-1] if text.strip() else text
    missing = "cannot open shared object" in text
    if missing and (driver := _DRIVER_LIBS.search(text)):
        return NpuStatus(
            NpuUnavailable.DRIVER_MISSING, f"{driver.group(0)}: cannot open shared object file", DRIVER_FIX
        )
    if missing and (cann := _CANN_LIBS.search(text)):
        return NpuStatus(NpuUnavailable.CANN_NOT_SOURCED, f"{cann.group(0)}: cannot open shared object file", CANN_FIX)
    if re.search(r"undefined symbol: _ZN\w*3atb", text):
        return NpuStatus(NpuUnavailable.ATB_MISSING, _first_line_with(text, "undefined symbol"), ATB_FIX)
    if _NNAL_MESSAGE.search(text):
        return NpuStatus(NpuUnavailable.ATB_MISSING, _first_line_with(text, "nnal") or last, ATB_FIX)
    if re.search(r"undefined symbol: _ZN\w*c10", text) or re.search(
        r"(torch_npu|torch).{0,80}version.{0,80}(mismatch|not match|incompatible|requires)", text, re.I
    ):
        return NpuStatus(
            NpuUnavailable.TORCH_MISMATCH,
            _first_line_with(text, "undefined symbol") or last,
            "install the torch release this torch_npu was built for (torch_npu X.Y.Z[.postN] pairs with "
            "torch X.Y.Z); see recipes/matrices for the verified combinations",
        )
    return NpuStatus(NpuUnavailable.IMPORT_ERROR, last, "run `python -c 'import torch_npu'` to see the full error")


def _first_line_with(text: str, needle: str) -> str:
    return next((line.strip() for line in text.splitlines() if needle.lower() in line.lower()), "")


@functools.lru_cache(maxsize=1)
def _load_torch_npu() -> tuple[ModuleType | None, NpuStatus]:
    # Cached: importing torch_npu is slow and its outcome cannot change within a process.
    if envs.ASCEND_BACKEND_DISABLE_NPU:
        return None, NpuStatus(NpuUnavailable.DISABLED, "ASCEND_BACKEND_DISABLE_NPU=1", "unset it")
    failed = autoload.failure()
    if failed is not None:  # torch's autoload already tried, in `import torch`; its error is the evidence
        return None, classify_npu_import_error(failed)
    if importlib.util.find_spec("torch_npu") is None:
        return None, NpuStatus(
            NpuUnavailable.NOT_INSTALLED,
            "no module named torch_npu",
            "on an Ascend machine: install the torch_npu matching your torch (pip install '.[npu]')",
        )
    try:
        module = importlib.import_module("torch_npu")
    except Exception as exc:  # noqa: BLE001 - any import failure is data for the checks
        import traceback

        return None, classify_npu_import_error("".join(traceback.format_exception(exc)))
    try:
        visible = bool(torch.npu.is_available())  # type: ignore[attr-defined]
    except Exception as exc:  # noqa: BLE001
        visible, why = False, f"torch.npu.is_available() raised {exc!r}"
    else:
        why = "torch.npu.is_available() is False"
    if not visible:
        return module, NpuStatus(
            NpuUnavailable.NO_DEVICE,
            why,
            "run `npu-smi info`: no card listed means a driver problem; a listed card means a permission "
            "or ASCEND_RT_VISIBLE_DEVICES problem",
        )
    return module, NpuStatus(NpuUnavailable.AVAILABLE, f"torch_npu {getattr(module, '__version__', '?')}", "")


def npu_status() -> NpuStatus:
    """Whether the NPU tier is usable, and if not, why and how to fix it."""
    return _load_torch_npu()[1]


def torch_npu() -> ModuleType:
    """The torch_npu module; raises with the classified reason when unusable.

    Only the guard factory (`ascend_backend.npu.guard`) calls this: adapters get the module from it.
    """
    module, status = _load_torch_npu()
    if module is None or not status.available:
        raise RuntimeError(f"torch_npu unusable: {status.kind.value} ({status.detail}). Fix: {status.fix}")
    return module


def classify_atb_load(error: BaseException | None, kernels_registered: bool) -> NpuStatus:
    """ATB_MISSING when op-plugin's ATB library failed to load (`error`) or no ATB kernel is registered."""
    if error is not None:
        cause = error.__cause__
        detail = " ".join(part for part in (str(error).strip(), str(cause).strip() if cause else "") if part)
        return NpuStatus(NpuUnavailable.ATB_MISSING, detail or type(error).__name__, ATB_FIX)
    if not kernels_registered:
        return NpuStatus(
            NpuUnavailable.ATB_MISSING,
            "torch.ops.atb has no _npu_reshape_and_cache: libop_plugin_atb.so was not loaded",
            ATB_FIX,
        )
    return NpuStatus(NpuUnavailable.AVAILABLE, "op-plugin ATB kernels loaded", "")


def _load_atb(module: ModuleType) -> tuple[BaseException | None, bool]:
    """Run op-plugin's own ATB loader now rather than at the first `_npu_*` call.

    torch_npu.op_plugin.atb._atb_ops._register_atb_extensions (op_plugin/python/atb/_atb_ops.py at
    op-plugin 7.0.0: loads libop_plugin_atb.so; 7.1.0+: re-raises the load error kept at import) is what
    every lazy `_npu_*` wrapper calls first; it is cached, so calling it here changes nothing but timing.
    """
    try:
        atb_ops = importlib.import_module(f"{module.__name__}.op_plugin.atb._atb_ops")
        register = getattr(atb_ops, "_register_atb_extensions", None)
        if register is not None:
            register()
    except ImportError:
        pass  # a torch_npu without op-plugin's Python layer: the registration check below decides
    except Exception as exc:  # noqa: BLE001 - any load failure is the evidence we report
        return exc, False
    return None, hasattr(torch.ops.atb, "_npu_reshape_and_cache")


@functools.lru_cache(maxsize=1)
def atb_status() -> NpuStatus:
    """Whether the ATB kernels (`torch_npu._npu_*`) can run; the NPU's own status when torch_npu cannot."""
    module, status = _load_torch_npu()
    if module is None or not status.available:
        return status
    return classify_atb_load(*_load_atb(module))


def cann_version() -> str | None:
    """CANN's version as torch_npu reports it (`torch.version.cann`), or None without a usable torch_npu."""
    module, _status = _load_torch_npu()
    if module is None:
        return None
    return getattr(torch.version, "cann", None)


def npu_device_name() -> str | None:
    """'Ascend910B4' for device 0 when the NPU tier is usable, else None."""
    if not npu_status().available:
        return None
    return str(torch.npu.get_device_name(0))  # type: ignore[attr-defined]


@dataclass(frozen=True)
class DeviceInfo:
    kind: DeviceKind
    name: str
    count: int
    total_memory: int | None  # bytes, per device; None where unknown
    free_memory: int | None
    npu: NpuStatus

    @property
    def torch_device(self) -> torch.device:
        return torch.device(self.kind.value, 0) if self.kind is not DeviceKind.CPU else torch.device("cpu")


def detect() -> DeviceInfo:
    """The best device here: npu, else cuda, else cpu, with name, count and memory."""
    status = npu_status()
    if status.available:
        npu = torch.npu  # type: ignore[attr-defined]
        free, total = npu.mem_get_info(0)
        return DeviceInfo(DeviceKind.NPU, npu.get_device_name(0), npu.device_count(), total, free, status)
    if torch.cuda.is_available():
        free, total = torch.cuda.mem_get_info(0)
        return DeviceInfo(
            DeviceKind.CUDA, torch.cuda.get_device_name(0), torch.cuda.device_count(), total, free, status
        )
    total, free = _host_memory()
    return DeviceInfo(DeviceKind.CPU, _cpu_name(), 1, total, free, status)


def kind_of(device: torch.device | str) -> DeviceKind:
    """DeviceKind of a tensor's device ('npu:0' -> NPU, 'cuda:1' -> CUDA, anything else -> CPU)."""
    # Parse strings ourselves: torch.device("npu:0") raises where torch_npu is not loaded.
    dev_type = device.type if isinstance(device, torch.device) else str(device).split(":", 1)[0].strip()
    return {"npu": DeviceKind.NPU, "cuda": DeviceKind.CUDA}.get(dev_type, DeviceKind.CPU)


def synchronize(kind: DeviceKind | None = None) -> None:
    """Wait for queued kernels (needed before timing on npu/cuda; a no-op on cpu)."""
    kind = kind or detect().kind
    if kind is DeviceKind.NPU:
        torch.npu.synchronize()  # type: ignore[attr-defined]
    elif kind is DeviceKind.CUDA:
        torch.cuda.synchronize()


def _host_memory() -> tuple[int | None, int | None]:
    try:
        fields = dict(line.split(":", 1) for line in open("/proc/meminfo", encoding="ascii"))
    except OSError:
        return None, None

    def kib(key: str) -> int | None:
        raw = fields.get(key)
        return int(raw.split()[0]) * 1024 if raw else None

    return kib("MemTotal"), kib("MemAvailable")


def _cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8", errors="replace"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "cpu"
