"""vllm-ascend's `collect_env.py` output, read back into the stack it describes.

Bug reports carry this text (the issue template asks for it); it names the versions that decide most
failures. Its layout, from vllm-ascend's `collect_env.py` (`env_info_fmt`, tag v0.23.0):

    PyTorch version: 2.5.1                      Python version: 3.10.18 (main, ...) [GCC 11.2.0] (64-bit runtime)
    OS: Ubuntu 20.04.6 LTS (aarch64)            Python platform: Linux-5.4.0-216-generic-aarch64-with-glibc2.31
    CPU: ... Model name: Kunpeng-920
    Versions of relevant libraries:
    [pip3] torch-npu==2.5.1.post1               [conda] torch-npu   2.5.1.post1   pypi_0   pypi
    vLLM Version: 0.9.1
    vLLM Ascend Version: 0.9.1                  (absent in older releases, which print "vLLM Build Flags:")
    ENV Variables:                              (older releases: the variables follow without this title)
    ASCEND_TOOLKIT_HOME=/usr/local/Ascend/ascend-toolkit/latest
    NPU:
    <npu-smi info>                              the driver version is the table header's "Version:"
    CANN:
    package_name=Ascend-cann-toolkit            (ascend_toolkit_install.info)
    version=8.2.RC1.alpha001

The record's `as_stack()` uses the keys of the stack fingerprint (`workbench.stack.fingerprint.read_stack`), so a
pasted report can be compared with this machine's stack or a lock file. The firmware version and the
CANN kernels / NNAL versions are not in collect_env's output: they stay None, never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from workbench.stack.infofiles import parse_key_values
from workbench.stack.npu_smi import NpuSmiParseError, NpuSmiTable, parse_npu_smi_info

_MARKERS = ("Collecting environment information", "PyTorch version", "vLLM Version", "Is debug build")
_PIP = re.compile(r"^\[pip3?\] (?P<name>[\w.-]+)==(?P<version>\S+)", re.MULTILINE)
_CONDA = re.compile(r"^\[conda\] (?P<name>[\w.-]+)\s+(?P<version>\d\S*)", re.MULTILINE)
_ENV = re.compile(r"^(?P<key>(?:ASCEND|ATB|TORCH|PYTORCH|HCCL|VLLM|LD_LIBRARY)[A-Z0-9_]*)=(?P<value>.*)$", re.MULTILINE)
_VERSION_KEYS = {"torch": "torch", "torch-npu": "torch-npu", "torch_npu": "torch-npu", "transformers": "transformers"}


@dataclass(frozen=True)
class CollectedEnv:
    """The stack a collect_env paste describes; None where the paste does not say."""

    torch: str | None
    torch_npu: str | None
    vllm: str | None
    vllm_ascend: str | None
    transformers: str | None
    python: str | None
    os: str | None
    platform: str | None
    cpu_model: str | None
    cann_toolkit: str | None
    cann_arch: str | None
    driver: str | None  # the version npu-smi's header reports (the loaded driver)
    chips: tuple[str, ...]  # chip names of the npu-smi table
    card_count: int | None
    env: dict[str, str]
    npu_smi: NpuSmiTable | None
    npu_smi_problem: str | None  # why the NPU section could not be read as a table

    def as_stack(self) -> dict[str, Any]:
        """The keys of the stack fingerprint; unknown values are None."""
        versions = {
            k: v
            for k, v in (
                ("torch", self.torch),
                ("torch-npu", self.torch_npu),
                ("vllm", self.vllm),
                ("vllm-ascend", self.vllm_ascend),
                ("transformers", self.transformers),
            )
            if v
        }
        return {
            "python": self.python,
            "versions": versions,
            "cann": {"toolkit": self.cann_toolkit, "kernels": None, "nnal_atb": None},
            "driver": self.driver,
            "firmware": None,
            "chip": ",".join(self.chips) or None,
            "card_count": self.card_count,
            "os": self.os,
            "cpu_model": self.cpu_model,
            "platform": self.platform,
        }

    def summary(self) -> str:
        """One line: 'vllm-ascend 0.9.1, vLLM 0.9.1, torch 2.5.1, torch-npu 2.5.1.post1, CANN 8.2.RC1.alpha001,
        driver 24.1.0.1, 8 x 310P3'."""
        parts = [
            f"vllm-ascend {self.vllm_ascend}" if self.vllm_ascend else None,
            f"vLLM {self.vllm}" if self.vllm else None,
            f"torch {self.torch}" if self.torch else None,
            f"torch-npu {self.torch_npu}" if self.torch_npu else None,
            f"CANN {self.cann_toolkit}" if self.cann_toolkit else None,
            f"driver {self.driver}" if self.driver else None,
            f"{self.card_count} x {','.join(self.chips)}" if self.chips else None,
        ]
        return ", ".join(p for p in parts if p) or "no versions found"


def looks_like_collect_env(text: str) -> bool:
    """Whether `text` holds a collect_env report (two of its markers; a crashed run prints one, and the
    traceback is then triaged like any log)."""
    return sum(marker in text for marker in _MARKERS) >= 2


def _field(text: str, label: str) -> str | None:
    """'Label: value' (vllm-ascend) or 'Label     : value' (upstream vLLM's sectioned layout)."""
    match = re.search(rf"^{re.escape(label)}[ \t]*:[ \t]*(.+?)\s*$", text, re.MULTILINE)
    value = match.group(1) if match else None
    return None if value in (None, "Could not collect", "N/A") else value


def _packages(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for pattern in (_CONDA, _PIP):  # pip lines win: collect_env prints the running interpreter's pip list
        for match in pattern.finditer(text):
            key = _VERSION_KEYS.get(match["name"].lower())
            if key:
                found[key] = match["version"]
    return found


def _npu_section(text: str) -> tuple[NpuSmiTable | None, str | None]:
    at = text.find("\nNPU:")
    if at < 0:
        return None, "no NPU section"
    section = text[at + len("\nNPU:") :]
    end = section.find("\nCANN:")
    section = section[:end] if end >= 0 else section
    try:
        return parse_npu_smi_info(section), None
    except (NpuSmiParseError, ValueError) as exc:
        return None, f"the NPU section is not an npu-smi table ({exc})"


def _cann(text: str) -> dict[str, str]:
    """The ascend_toolkit_install.info lines after 'CANN:' (up to the first line that is not key=value)."""
    at = text.find("\nCANN:")
    if at < 0:
        return {}
    lines = []
    for line in text[at + len("\nCANN:") :].splitlines()[1:]:
        if "=" not in line:
            if lines:
                break
            continue
        lines.append(line)
    return parse_key_values("\n".join(lines))


def parse_collect_env(text: str) -> CollectedEnv:
    """The stack of a collect_env paste (any release's layout; missing parts are None)."""
    packages = _packages(text)
    python = _field(text, "Python version")
    table, problem = _npu_section(text)
    cann = _cann(text)
    return CollectedEnv(
        torch=_field(text, "PyTorch version") or packages.get("torch"),
        torch_npu=packages.get("torch-npu"),
        vllm=_field(text, "vLLM Version"),
        vllm_ascend=_field(text, "vLLM Ascend Version"),
        transformers=packages.get("transformers"),
        python=python.split()[0] if python else None,
        os=_field(text, "OS"),
        platform=_field(text, "Python platform"),
        cpu_model=_field(text, "Model name"),
        cann_toolkit=cann.get("version"),
        cann_arch=cann.get("arch"),
        driver=table.driver_version if table else None,
        chips=tuple(sorted({c.name for c in table.chips})) if table else (),
        card_count=len(table.npu_ids) if table else None,
        env={m["key"]: m["value"].strip() for m in _ENV.finditer(text)},
        npu_smi=table,
        npu_smi_problem=problem,
    )
