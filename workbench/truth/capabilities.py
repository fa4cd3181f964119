"""What a vllm-ascend release accepts: quantization methods, KV-cache dtypes, KV connectors, architectures.

One set of answers the lint (a serving command's flags), `lint --checkpoint` (a checkpoint's
`quant_method` and architecture), the scan (a service's `quantization=` settings) and triage (through the
lint) share, read from the config-truth table (`table.capabilities` from vllm-ascend's source at every tag,
the `VllmVersion` facts from vLLM's sdists):

- a quantization method passes vLLM's parser only if it is one of `--quantization`'s choices (vllm-ascend
  adds its 'ascend' method to them from the tag that patches the parser), and start-up only if
  `NPUPlatform.supported_quantization` lists it ("... quantization is currently not supported in npu");
- a KV-cache dtype must be one of `--kv-cache-dtype`'s choices;
- a KV connector must be registered by vLLM or by vllm-ascend at that tag (or named by a module path);
- an architecture must be in vLLM's registry or registered by vllm-ascend.

Each answer is a `Verdict` with the reason and the TAG:path:line (or the sdist) it rests on.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.truth.table import ConfigTable, VllmVersion


@dataclass(frozen=True)
class Capability:
    """Whether a release takes a value, and why (None: the table cannot say)."""

    accepted: bool | None
    reason: str
    cite: str
    stage: str = ""  # where a refusal happens: 'parser' (the command is refused) or 'start-up'


def quantization(
    table: ConfigTable, tag: str, vllm: tuple[VllmVersion, ...], method: str, parser: bool = True
) -> Capability:
    """Whether `--quantization method` starts at `tag` (with the vLLM it pairs with); `parser=False` for a
    method a checkpoint's config.json names (no argument parser between it and the platform's list)."""
    method = method.strip().lower()
    choices = set().union(*(v.quantization for v in vllm)) if vllm and parser else set()
    added = table.capability_at("quantization_choice", tag)
    if added is not None and choices:
        choices = choices | {"ascend"}
    label = "/".join(v.version for v in vllm) or "?"
    if choices and method not in choices:
        how = "" if method != "ascend" else " (this release does not add 'ascend' to the parser's choices)"
        return Capability(
            False,
            f"vLLM {label}'s argument parser refuses --quantization {method}: not one of its choices{how}",
            vllm[0].cite if vllm else "",
            "parser",
        )
    supported = table.capability_at("quantization", tag)
    if supported is None:
        return Capability(None, "the table does not read which methods this release supports", "")
    methods = [str(m) for m in supported.get("methods", [])]
    if method not in methods:
        return Capability(
            False,
            f"start-up raises ValueError ('{method} quantization is currently not supported in npu'): "
            f"NPUPlatform.supported_quantization at {tag} is {methods}",
            supported.cite,
            "start-up",
        )
    return Capability(True, f"NPUPlatform.supported_quantization at {tag} lists {method}", supported.cite)


def kv_cache_dtype(vllm: tuple[VllmVersion, ...], dtype: str) -> Capability:
    choices = set().union(*(v.kv_cache_dtypes for v in vllm)) if vllm else set()
    label = "/".join(v.version for v in vllm) or "?"
    if not choices:
        return Capability(None, "the vLLM version is not known", "")
    if dtype not in choices:
        return Capability(
            False,
            f"vLLM {label}'s argument parser refuses --kv-cache-dtype {dtype} (choices: {sorted(choices)})",
            vllm[0].cite,
            "parser",
        )
    return Capability(True, f"one of vLLM {label}'s KV-cache dtypes", vllm[0].cite)


def kv_connector(table: ConfigTable, tag: str, vllm: tuple[VllmVersion, ...], name: str) -> Capability:
    ours = table.capability_at("kv_connectors", tag)
    registered = set(ours.get("names", [])) if ours else set()
    theirs = set().union(*(v.kv_connectors for v in vllm)) if vllm else set()
    if name in registered:
        return Capability(True, f"vllm-ascend {tag} registers {name}", ours.cite)
    if name in theirs:
        return Capability(True, f"vLLM registers {name}", vllm[0].cite)
    if not registered and not theirs:
        return Capability(None, "the table does not read which connectors this release registers", "")
    known = sorted(registered | theirs)
    return Capability(
        False,
        f"no KV connector {name!r} is registered at {tag} (vllm-ascend and vLLM register {known}); start-up fails "
        "looking it up",
        ours.cite if ours else "",
        "start-up",
    )


def architecture(table: ConfigTable, tag: str, vllm: tuple[VllmVersion, ...], arch: str) -> Capability:
    ours = table.capability_at("architectures", tag)
    if ours and arch in ours.get("names", []):
        return Capability(True, f"vllm-ascend {tag} registers its own {arch}", ours.cite)
    theirs = set().union(*(v.architectures for v in vllm)) if vllm else set()
    if not theirs:
        return Capability(None, "the vLLM version is not known", "")
    if arch in theirs:
        return Capability(True, f"vLLM {'/'.join(v.version for v in vllm)} serves {arch}", vllm[0].cite)
    return Capability(
        False,
        f"neither vLLM {'/'.join(v.version for v in vllm)} nor vllm-ascend {tag} knows the architecture {arch} "
        "('Model architectures [...] are not supported for now')",
        vllm[0].cite,
        "start-up",
    )


def is_multimodal(vllm: tuple[VllmVersion, ...], arch: str) -> bool | None:
    """Whether vLLM's registry files `arch` among its multimodal models (None: it does not know it)."""
    if not any(arch in v.architectures for v in vllm):
        return None
    return any(arch in v.multimodal_architectures for v in vllm)


def newest_release(table: ConfigTable) -> str:
    """The newest released tag of the table (main is not a release)."""
    return [t for t in table.tags if t != "main"][-1]


def unsupported_quantization(table: ConfigTable, method: str, tag: str | None = None) -> Capability | None:
    """A method some vLLM knows that vllm-ascend at `tag` (the newest release when None) refuses, with why;
    None when vllm-ascend takes it or no vLLM knows the name (a value the table cannot judge)."""
    tag = tag or newest_release(table)
    known = set().union(*(v.quantization for v in table.vllm.values()))
    method = method.strip().lower()
    if method not in known and method != "ascend":
        return None
    verdict = quantization(table, tag, table.vllm_for(tag), method)
    return verdict if verdict.accepted is False else None
