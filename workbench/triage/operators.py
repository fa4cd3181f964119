"""The operator an error block names, and the op of the workbench's suite that tests it.

Logs name a kernel four ways (examples from public issue posts, tests/fixtures/triage/SOURCES.md), most
specific first:

    aclnn API      'call aclnnQuantMatmulWeightNz failed', 'the current working operator name is aclnnRmsNorm'
    torch_npu call 'torch_npu.npu_quant_matmul(', 'torch_npu._npu_paged_attention('
    CANN op type   'op[QuantBatchMatmulV3]', 'Optype [TransData]', 'Cannot find bin of op PromptFlashAttention'
    HCCL operation 'OpType=ALLREDUCE', 'HcclAllreduce', 'hcclCommInitRootInfoConfig'

`suite_op` maps a name to an op of recipes/ops through the knowledge base's `operators` table, so the
verify step can be `compare-ops --op rms_norm` rather than the whole suite.
"""

from __future__ import annotations

import re

from workbench.triage.knowledge import KnowledgeBase

_NAMED = (
    re.compile(r"working operator name is (?P<op>\w+)"),
    re.compile(r"\b(?P<op>aclnn[A-Z]\w*)"),
    re.compile(r"torch_npu\.(?P<op>_?npu_[a-z]\w*)\("),
    re.compile(r"\bop\[(?P<op>[A-Z]\w*)\]"),
    re.compile(r"Optype \[(?P<op>\w+)\]"),
    re.compile(r"Cannot find bin(?:ary)? (?:of|for) op (?P<op>\w+)"),
    re.compile(r"\bop type (?P<op>[A-Z]\w+)"),
    re.compile(r"OpType=(?P<op>[A-Z_]+)"),
    re.compile(r"\b(?P<op>[Hh]ccl(?:Comm\w+|All\w+|Broadcast|Reduce\w*|Send|Recv))\b"),
)
_MAY_NAME = re.compile(r"aclnn|npu_|op\[|Optype|bin of op|bin for op|op type|OpType|[Hh]ccl|operator name")


def find_operators(text: str) -> list[str]:
    """Operator names in one line, most specific kind first."""
    if not _MAY_NAME.search(text):
        return []
    names: list[str] = []
    for pattern in _NAMED:
        names += [m["op"] for m in pattern.finditer(text) if m["op"] not in names]
    return names


def suite_op(names: tuple[str, ...], kb: KnowledgeBase) -> str | None:
    """The op of recipes/ops that exercises the first of `names` the table knows."""
    for name in names:
        for entry in kb.operators:
            if entry.regex.search(name):
                return entry.op
    return None
