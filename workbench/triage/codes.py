"""Error codes found in log text, and what a code says about itself when the knowledge base has no entry.

Four kinds, as the logs print them (examples from public issue posts, tests/fixtures/triage/SOURCES.md):

    acl        six-digit AscendCL / runtime / aclnn codes, only where the text says it is one:
               'error code is 507015', 'error code:507035', 'runtime result = 507033', 'ret[107001]',
               'ErrCode=107030', 'rtKernelLaunchWithHandleV2 failed: 507035', 'error no is 561103',
               '报错码507011' (Chinese prose: 'error code')
    message    CANN message codes, E + module character + four digits: EZ9999, EE1001, EI0002, EL0009
    torch_npu  ERR + module + type: ERR00100 (PTA, ACL call), ERR02200 (DIST, HCCL call)
    hccl       an HcclResult printed by a failed HCCL call: 'HCCL function error: ..., error code is 1'

A six-digit number is never taken as a code on its own (task ids and sizes are numbers too), and the
hex codes CANN prints inside messages (retCode=0x7020010) are driver-internal, not aclError codes.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from workbench.triage.knowledge import (
    INTERNAL_MESSAGE_CODE_PRIORITY,
    MESSAGE_CODE_PRIORITY,
    NUMERIC_CODE_PRIORITY,
    TORCH_NPU_CODE_PRIORITY,
    CodeGrammar,
)


class CodeKind(str, enum.Enum):
    ACL = "acl"
    MESSAGE = "message"
    TORCH_NPU = "torch_npu"
    HCCL = "hccl"


@dataclass(frozen=True)
class ErrorCode:
    kind: CodeKind
    value: str  # '507015', 'EZ9999', 'ERR00100', '1' (an HcclResult)

    def __str__(self) -> str:
        return f"HCCL result {self.value}" if self.kind is CodeKind.HCCL else self.value

    @property
    def priority(self) -> int:
        """How much this code decides a block's kind against other codes and signatures in it."""
        if self.kind is CodeKind.ACL:
            return NUMERIC_CODE_PRIORITY
        if self.kind is CodeKind.MESSAGE:
            return INTERNAL_MESSAGE_CODE_PRIORITY if self.value[2] == "9" else MESSAGE_CODE_PRIORITY
        return TORCH_NPU_CODE_PRIORITY


# Chinese prose names a code the same way: '报错码507011', '错误码：507035', '返回码为 107001' (vllm-ascend#6018).
_ACL_CONTEXT = (
    r"(?:error code(?: is|:| =)?|runtime result =|ErrCode=|ret\[|error no is|(?:failed|fail)[:,]|result ="
    r"|(?:报错码|错误码|返回码)(?:为|是)?[:：]?)"
)
_CODES = re.compile(
    rf"{_ACL_CONTEXT}\s*(?P<acl>[1-5]\d{{5}})(?!\d)"
    r"|\b(?P<torch_npu>ERR\d{5})\b"
    r"|\b(?P<message>E[0-9A-Z]\d{4})\b"
)
# An HcclResult: torch_npu's "HCCL function error: ..., error code is 6"; HCCL's own records in a plog,
# "[ServerInit]call trace: hcclRet -> 19" and "[LinksEstablishCompleted] is failed. ret[9]." (the record's
# source file, hccl_*.cc, names the module).
_HCCL_RESULT = re.compile(
    r"(?:HCCL function error|[Hh]ccl\w*).*?(?:error code is |hcclRet -> |ret\[)(?P<hccl>\d{1,2})(?!\d)"
)
# Quick filter: a line that holds none of these cannot hold a code.
_MAY_HOLD_CODE = re.compile(r"\d{5}|ERR\d|\bE[0-9A-Z]\d|error code is \d|hcclRet|ret\[\d")


def find_codes(text: str) -> list[ErrorCode]:
    """Codes in one line, in order of appearance."""
    if not _MAY_HOLD_CODE.search(text):
        return []
    found = []
    for match in _CODES.finditer(text):
        kind = next(k for k in ("acl", "torch_npu", "message") if match[k])
        found.append(ErrorCode(CodeKind(kind), match[kind]))
    hccl = _HCCL_RESULT.search(text)
    if hccl:
        found.append(ErrorCode(CodeKind.HCCL, hccl["hccl"]))
    return found


def describe(code: ErrorCode, grammar: CodeGrammar) -> str:
    """What the code's own digits and letters say: class and component of an aclError, module and range
    of a message code, module and type of a torch_npu code, the name of an HcclResult."""
    value = code.value
    if code.kind is CodeKind.ACL:
        component = grammar.acl_ranges.get(value[:3], "an AscendCL component")
        return f"{value}: {component}; {grammar.acl_classes.get(value[0], 'an unlisted aclError class')}"
    if code.kind is CodeKind.MESSAGE:
        module = grammar.message_modules.get(value[1], f"module {value[1]!r} (not in CANN's list)")
        scope = "an internal error (9000-9999)" if value[2] == "9" else "a user error (0000-8999)"
        return f"{value}: {module}, {scope}"
    if code.kind is CodeKind.TORCH_NPU:
        module = grammar.torch_npu_modules.get(value[3:5], f"module {value[3:5]}")
        kind = grammar.torch_npu_types.get(value[5:], f"type {value[5:]}")
        return f"{value}: torch_npu {module}: {kind}"
    return f"HCCL result {value}: {grammar.hccl_results.get(value, 'an HcclResult not in hccl_types.h')}"
