"""What an error block means: the knowledge base's entry that decides it, or what its codes say alone.

Every code and signature of a block is a candidate; the one with the highest priority decides the kind
(a signature names the stage an out-of-memory happened in, or a graph capture, better than the codes
around it; numeric codes are more specific than message codes, and torch_npu's ERRxxxxx only says which
layer called). A block whose codes have no entry is described from the codes' own grammar (class,
module, range), so an unknown code still comes out with its code, its meaning as far as the digits go,
and its block — never as a bare "unknown". A setting the serving stack refused (`config_refused`) is handed
to `lint` (`refusals`): the fix is lint's finding on that setting at the release the log shows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from workbench.triage.blocks import ErrorBlock
from workbench.triage.codes import CodeKind, ErrorCode, describe
from workbench.triage.kinds import FailureKind
from workbench.triage.knowledge import CodeEntry, KnowledgeBase, SignatureEntry
from workbench.triage.operators import suite_op

EVIDENCE_LINES = 3


@dataclass(frozen=True)
class Diagnosis:
    kind: FailureKind
    basis: str  # what decided it: 'code 507015', 'signature oom_weights', 'code EZ1234 (no entry)'
    code: ErrorCode | None  # the code the diagnosis rests on
    codes: tuple[str, ...]  # every code of the block, described
    meaning: str
    summary: str  # the family's one line
    causes: tuple[str, ...]  # most likely first
    fix: str
    verify: str  # the command that confirms the fix
    suite_op: str | None  # the op of recipes/ops that exercises the block's operator
    method: tuple[int, ...]  # sections of docs/METHOD.md
    cites: tuple[str, ...]  # addresses
    consequence: bool  # follows from an earlier error
    known: bool  # an entry of the knowledge base decided it
    evidence: tuple[str, ...]  # the block's lines that decided it


@dataclass(frozen=True)
class _Candidate:
    priority: int
    order: int  # position in the block: earlier wins a tie
    entry: CodeEntry | SignatureEntry
    code: ErrorCode | None
    basis: str
    forewarned: bool = False  # hit only on the WARNING line that opened the block: the block's own errors first


def _describe_code(code: ErrorCode, kb: KnowledgeBase) -> str:
    entry = kb.codes.get(code.value) if code.kind is not CodeKind.HCCL else None
    if entry is None:
        return describe(code, kb.grammar)
    return f"{code.value}" + (f" {entry.name}" if entry.name else "") + f": {entry.meaning}"


def _signature_hits(signature: SignatureEntry, block: ErrorBlock, text: str) -> bool:
    if not signature.regex.search(text):  # one search per block: no pattern spans a line break
        return False
    if signature.frames_regex is None:
        return True
    return any(signature.frames_regex.search(f"{f.path} {f.function}") for f in block.frames)


def _candidates(block: ErrorBlock, kb: KnowledgeBase) -> list[_Candidate]:
    found, text = [], block.text
    for order, code in enumerate(block.codes):
        entry = kb.codes.get(code.value) if code.kind is not CodeKind.HCCL else None
        if entry is not None:
            found.append(_Candidate(code.priority, order, entry, code, f"code {code.value}"))
    for signature in kb.signatures:
        if block.codes and signature.consequence and signature.family is FailureKind.UNKNOWN:
            continue  # "the engine died" next to a code: the code, even one without an entry, says more
        if _signature_hits(signature, block, text):
            forewarned = signature.in_warnings and _only_in_warnings(signature, block)
            basis = f"signature {signature.id}"
            found.append(_Candidate(signature.priority, len(block.codes), signature, None, basis, forewarned))
    # A warning that names the failure to come decides only a block whose own error lines name no family: when
    # every line of a process carries its tag, vLLM's V0-fallback warning joins the block of whatever error
    # comes next (vllm-ascend#672: an HCCL init failure after that warning)
    named = any(not c.forewarned and c.entry.family is not FailureKind.UNKNOWN for c in found)
    return sorted(found, key=lambda c: (c.forewarned and named, -c.priority, c.order))


def _only_in_warnings(signature: SignatureEntry, block: ErrorBlock) -> bool:
    """The signature hits the warning that opened the block and none of the block's own lines."""
    return block.forewarned and not any(signature.regex.search(line) for line in block.lines[1:])


def _evidence(block: ErrorBlock, candidate: _Candidate | None) -> tuple[str, ...]:
    if candidate is None:  # nothing decided: the lines that were read, the exception last
        lines = [*block.lines[: EVIDENCE_LINES - 1], *([block.exception] if block.exception else [])]
    elif isinstance(candidate.entry, SignatureEntry):
        lines = [line for line in block.lines if candidate.entry.regex.search(line)]
    else:
        value = candidate.code.value if candidate.code else ""
        lines = [line for line in block.lines if value in line]
    return tuple(line.strip() for line in lines[-EVIDENCE_LINES:])


def _most_telling(codes: tuple[ErrorCode, ...]) -> ErrorCode | None:
    return max(codes, key=lambda c: (c.priority, c.kind is not CodeKind.HCCL), default=None)


def diagnose(block: ErrorBlock, kb: KnowledgeBase) -> Diagnosis:
    """The diagnosis of one block against the knowledge base."""
    candidates = _candidates(block, kb)
    best = candidates[0] if candidates else None
    kind = best.entry.family if best else FailureKind.UNKNOWN
    code = best.code if best and best.code else _most_telling(block.codes)
    uncoded = best is None and code is None and kb.uncoded is not None
    family = kb.uncoded if uncoded and kb.uncoded else kb.families[kind]
    entry = best.entry if best else None
    op = suite_op(block.operators, kb)
    if best is not None:
        meaning, basis = best.entry.meaning, best.basis
    elif code is not None:
        meaning, basis = describe(code, kb.grammar), f"code {code} (no entry in the knowledge base)"
    else:
        meaning, basis = block.exception or "an error without an Ascend code", "no Ascend error code"
    verify = (entry.verify if entry and entry.verify else family.verify).command(op)
    diagnosis = Diagnosis(
        kind=kind,
        basis=basis,
        code=code,
        codes=tuple(_describe_code(c, kb) for c in block.codes),
        meaning=meaning,
        summary=family.summary,
        causes=(entry.causes if entry and entry.causes else family.causes),
        fix=(entry.fix if entry and entry.fix else family.fix),
        verify=verify,
        suite_op=op,
        method=family.method,
        cites=kb.cited(tuple(dict.fromkeys((*(entry.cite if entry else ()), *family.cite)))),
        consequence=bool(entry and entry.consequence),
        known=best is not None,
        evidence=_evidence(block, best),
    )
    return _with_lint(diagnosis, block) if kind is FailureKind.CONFIG_REFUSED else diagnosis


def _with_lint(diagnosis: Diagnosis, block: ErrorBlock) -> Diagnosis:
    """A refused setting's diagnosis with lint's finding as the fix, when the log names the setting."""
    from workbench.triage.refusals import lint_advice

    advice = lint_advice(block.text)
    if advice is None:
        return diagnosis
    verify = f"ascend-workbench lint YOUR_COMMAND --release {advice.release}"
    return replace(diagnosis, fix=advice.text(), verify=verify, basis=f"{diagnosis.basis}; lint: {advice.setting}")
