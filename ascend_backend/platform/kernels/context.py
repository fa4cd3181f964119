"""What the kernel-selection table needs to know about a stack: vllm-ascend release, chip family, CANN, graph mode.

Three sources, one result (`SelectionContext`):

- this machine (`facts_from_machine`): installed vllm-ascend / torch_npu versions from package metadata,
  CANN from `torch.version.cann` and the device name, both only when torch_npu is usable;
- a stored stack fingerprint (`facts_from_stack`), the dict `workbench.provenance.stack()` writes:
  `{"versions": {"vllm-ascend": ..., "torch-npu": ...}, "cann": {"toolkit": ...}, "chip": ...}`;
- the override `ASCEND_BACKEND_KERNELS` (`apply_override`), which wins over both.

The release is the installed vllm-ascend when there is one; otherwise the matrix rows whose torch_npu
(and CANN, when known) match, newest first, as `recipes/matrices/vllm-ascend.yaml` pairs them (the backend
ships that pairing in `data/vllm_ascend_releases.json`). A missing key means unknown, never a guess
presented as a fact: every inference is written into `basis`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from packaging.version import InvalidVersion, Version

from ascend_backend.platform.kernels.recipes import RECIPES, kernel_of
from ascend_backend.platform.kernels.table import ChipFamily, GraphMode, ReleaseInfo, releases

# Device names -> families. vllm-ascend decides by soc_version (vllm_ascend/utils.py@v0.13.0
# get_ascend_device_type: 220-225 A2, 250-255 A3, 200-205 310P, 260 A5); the names below are the SoC
# names CANN gives those ranges (csrc/CMakeLists.txt@main: ascend910b, ascend910_93, ascend310p,
# ascend950). npu-smi prints A3 chips as plain "Ascend910" (tests/fixtures: npu_smi_info_a3_*); the
# first-generation Ascend 910 is not supported by vllm-ascend at all, so the bare name means A3.
_CHIP_PATTERNS = (
    (re.compile(r"^910b", re.I), ChipFamily.A2),
    (re.compile(r"^910_?93", re.I), ChipFamily.A3),
    (re.compile(r"^910$", re.I), ChipFamily.A3),
    (re.compile(r"^(950|910_?95)", re.I), ChipFamily.A5),
    (re.compile(r"^310p", re.I), ChipFamily.P310),
)
OVERRIDE_VAR = "ASCEND_BACKEND_KERNELS"
OVERRIDE_KEYS = ("release", "chip", "cann", "graph", "pa_shape", "arch", "checkpoint")
CHECKPOINTS = ("msmodelslim", "compressed-tensors")
DEFAULT_GRAPH_BASIS = "no engine config read: eager (NONE) assumed; pass --graph-mode or run inside the vLLM engine"


def chip_family(name: str | None) -> ChipFamily | None:
    """'Ascend910B4' -> A2, '910_9392' -> A3, 'Ascend310P3' -> 310P, 'Ascend950PR' -> A5, 'A3' -> A3, else None."""
    if not name:
        return None
    text = name.strip()
    for family in ChipFamily:
        if text.upper() == family.value.upper():
            return family
    bare = re.sub(r"^ascend", "", text, flags=re.I)
    return next((family for pattern, family in _CHIP_PATTERNS if pattern.search(bare)), None)


@dataclass(frozen=True)
class StackFacts:
    """The raw facts, each None when unknown."""

    vllm_ascend: str | None = None
    torch_npu: str | None = None
    cann: str | None = None
    chip_name: str | None = None


@dataclass(frozen=True)
class SelectionContext:
    """Everything a table row can depend on, with how each part was found."""

    release: Version | None  # the version rows are matched against; None = no release known
    release_basis: str
    candidates: tuple[Version, ...]  # matrix rows that fit when the release was inferred (newest first)
    chip: ChipFamily
    chip_basis: str
    cann: str | None
    graph_mode: GraphMode = GraphMode.NONE
    pa_shape: bool = False  # every decode batch size counts as in vllm-ascend's additional_config pa_shape_list
    pins: tuple[tuple[str, str], ...] = ()  # op -> recipe pinned by ASCEND_BACKEND_KERNELS
    graph_basis: str = DEFAULT_GRAPH_BASIS  # where the graph mode was found
    pa_shape_list: tuple[int, ...] = ()  # the engine's pa_shape_list: decode batch sizes that take _npu_paged_attention
    architecture: str | None = None  # the model's architecture (vLLM's architectures[0]), when known
    checkpoint: str | None = None  # the quantized checkpoint's format (msmodelslim | compressed-tensors), when known

    @property
    def release_label(self) -> str:
        if self.release is None and len(self.candidates) > 1:
            return "ambiguous (" + " | ".join(f"v{v}" for v in self.candidates) + ")"
        return "unknown" if self.release is None else f"v{self.release}"

    @property
    def ambiguous(self) -> bool:
        """torch_npu (and CANN) fit several matrix releases and none is installed or pinned."""
        return self.release is None and len(self.candidates) > 1

    def describe(self) -> str:
        """One line: 'vllm-ascend v0.13.0 (installed); chip A2 (Ascend910B4); CANN ...; graph NONE (...)'."""
        pa = " + pa_shape_list" if self.pa_shape else ""
        if self.pa_shape_list:
            pa = f" + pa_shape_list {list(self.pa_shape_list)}"
        extra = "".join(
            f"; {name} {value}"
            for name, value in (("model", self.architecture), ("checkpoint", self.checkpoint))
            if value
        )
        return (
            f"vllm-ascend {self.release_label} ({self.release_basis}); chip {self.chip.value} ({self.chip_basis}); "
            f"CANN {self.cann or 'unknown'}; graph {self.graph_mode.value}{pa} ({self.graph_basis}){extra}"
        )


def _versions(stack: Mapping[str, Any]) -> Mapping[str, Any]:
    versions = stack.get("versions")
    return versions if isinstance(versions, Mapping) else {}


def facts_from_stack(stack: Mapping[str, Any]) -> StackFacts:
    """Facts from a stack fingerprint dict; absent or null keys stay unknown."""
    versions = _versions(stack)
    cann = stack.get("cann")
    toolkit = cann.get("toolkit") if isinstance(cann, Mapping) else cann if isinstance(cann, str) else None
    return StackFacts(
        vllm_ascend=versions.get("vllm-ascend") or versions.get("vllm_ascend"),
        torch_npu=versions.get("torch-npu") or versions.get("torch_npu"),
        cann=toolkit,
        chip_name=stack.get("chip") if isinstance(stack.get("chip"), str) else None,
    )


def _parse(text: str | None) -> Version | None:
    if not text:
        return None
    try:
        return Version(str(text).lstrip("vV"))
    except InvalidVersion:
        return None


def _same_build(a: str, b: str) -> bool:
    """'2.9.0.post1+git4c901a4' matches itself and '2.9.0.post1'; '2.7.1' does not match '2.7.1.post1'."""
    va, vb = _parse(a), _parse(b)
    if va is None or vb is None:
        return a == b
    return va == vb or va.public == vb.public


def _release_from_vllm_ascend(version: Version, source: str) -> tuple[Version | None, str]:
    """The version rows are matched against, and why: itself when the table read it or it is newer than
    every release read (the rows read on main apply), else the newest older release the table read."""
    known = [r.release for r in releases()]
    if version in known:
        return version, source
    if version > known[-1]:
        return version, f"{source}; newer than v{known[-1]}: the rows read on main apply"
    older = [v for v in known if v < version]
    if not older:
        return None, f"{source}; older than v{known[0]}, the oldest release the table read"
    return older[-1], f"{source}; not a release the table read: rows of v{older[-1]}, the newest older one"


def _release_from_torch_npu(torch_npu: str, cann: str | None) -> tuple[Version | None, str, tuple[Version, ...]]:
    rows: list[ReleaseInfo] = [r for r in releases() if r.in_matrix and _same_build(r.torch_npu, torch_npu)]
    basis = f"vllm-ascend not installed; torch_npu {torch_npu}"
    if not rows:
        return None, f"{basis} matches no row of the verified matrix", ()
    if cann:
        with_cann = [r for r in rows if r.cann == cann]
        if with_cann:
            rows, basis = with_cann, f"{basis} and CANN {cann}"
    candidates = tuple(sorted((r.release for r in rows), reverse=True))
    names = ", ".join(f"v{v}" for v in candidates)
    chosen = candidates[0]
    if len(candidates) == 1:
        return chosen, f"{basis} match matrix row v{chosen}", candidates
    # Never chosen silently: an op whose kernel differs between the candidates runs native with the list.
    return (
        None,
        f"{basis} match matrix rows {names}: ambiguous; pin one with {OVERRIDE_VAR}=release=X.Y.Z "
        "(or install vllm-ascend itself)",
        candidates,
    )


def build_context(
    facts: StackFacts,
    *,
    graph_mode: GraphMode = GraphMode.NONE,
    pa_shape: bool = False,
    graph_basis: str = DEFAULT_GRAPH_BASIS,
) -> SelectionContext:
    """The context for these facts (before any override)."""
    installed = _parse(facts.vllm_ascend)
    candidates: tuple[Version, ...] = ()
    if installed is not None:
        release, basis = _release_from_vllm_ascend(installed, f"vllm-ascend {facts.vllm_ascend} installed")
    elif facts.torch_npu:
        release, basis, candidates = _release_from_torch_npu(facts.torch_npu, facts.cann)
    else:
        release, basis = None, "neither vllm-ascend nor torch_npu is installed"
    family = chip_family(facts.chip_name)
    if family is None:
        chip_basis = (
            f"device name {facts.chip_name!r} is not a chip vllm-ascend supports; A2 rows assumed"
            if facts.chip_name
            else "chip unknown; A2 rows assumed (vllm-ascend's default device adaptor)"
        )
        family = ChipFamily.A2
    else:
        chip_basis = facts.chip_name or family.value
    return SelectionContext(
        release, basis, candidates, family, chip_basis, facts.cann, graph_mode, pa_shape, graph_basis=graph_basis
    )


def apply_override(context: SelectionContext, items: tuple[tuple[str, str], ...]) -> SelectionContext:
    """Apply ASCEND_BACKEND_KERNELS items (already split into key=value pairs by `ascend_backend.envs`)."""
    changes: dict[str, Any] = {}
    pins: dict[str, str] = dict(context.pins)
    for key, value in items:
        if key == "release":
            version = _parse(value)
            if version is None:
                raise ValueError(f"{OVERRIDE_VAR}: release={value!r} is not a version (e.g. release=0.13.0)")
            release, basis = _release_from_vllm_ascend(version, f"{OVERRIDE_VAR} release={value}")
            changes.update(release=release, release_basis=basis, candidates=())
        elif key == "chip":
            family = chip_family(value)
            if family is None:
                raise ValueError(f"{OVERRIDE_VAR}: chip={value!r} is not a chip family; use A2, A3, A5 or 310P")
            changes.update(chip=family, chip_basis=f"{OVERRIDE_VAR}: {value}")
        elif key == "cann":
            changes["cann"] = value
        elif key == "graph":
            try:
                changes["graph_mode"] = GraphMode(value.upper())
            except ValueError:
                raise ValueError(
                    f"{OVERRIDE_VAR}: graph={value!r}; use one of {[m.value for m in GraphMode]}"
                ) from None
            changes["graph_basis"] = f"{OVERRIDE_VAR}: graph={value}"
        elif key == "pa_shape":
            changes["pa_shape"] = value.strip().lower() in {"1", "true", "yes", "on"}
        elif key == "arch":
            changes["architecture"] = value
        elif key == "checkpoint":
            if value not in CHECKPOINTS:
                raise ValueError(f"{OVERRIDE_VAR}: checkpoint={value!r}; use one of {list(CHECKPOINTS)}")
            changes["checkpoint"] = value
        elif key in RECIPES:
            kernel_of(key, value)  # raises naming the op's recipes when unknown
            pins[key] = value
        else:
            raise ValueError(
                f"{OVERRIDE_VAR}: unknown key {key!r}; use {', '.join(OVERRIDE_KEYS)} or an op name "
                f"({', '.join(sorted(RECIPES))}) = recipe"
            )
    return replace(context, **changes, pins=tuple(sorted(pins.items())))
