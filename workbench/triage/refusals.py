"""A refused setting in a log, handed to `lint`: triage knows what lint knows (docs/METHOD.md §2, §16).

vLLM's argument parser and its config validation, and vllm-ascend's platform checks, stop a server with a
Python error that carries no Ascend code: `vllm serve: error: unrecognized arguments: --swap-space`,
`argument --quantization/-q: invalid choice: 'ascend'`, `awq quantization is currently not supported in
npu`, `Flash Comm V1 is not supported for VL models`. Such a line names the setting; this module reads it
back into the smallest command that carries it and asks `lint` at the release the log shows (the vLLM it
prints, paired to a vllm-ascend release), so the diagnosis gives lint's finding and fix, not CANN advice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# (what the line says, how the setting is written in a command); the first group is the value
_REFUSALS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"argument (?:--quantization|-q)\S*: invalid choice: '([^']+)'"), "--quantization {0}"),
    (re.compile(r"\b([\w-]+) quantization is currently not supported in"), "--quantization {0}"),
    (re.compile(r"argument (--[\w-]+)\S*: invalid choice: '([^']+)'"), "{0} {1}"),
    (re.compile(r"Flash Comm V1 is not supported for VL models"), "VLLM_ASCEND_ENABLE_FLASHCOMM1=1"),
    (re.compile(r"does not support V0 engine"), "VLLM_USE_V1=0"),
    (re.compile(r"max_num_batched_tokens \((\d+)\) is smaller than max_model_len \((\d+)\)"), ""),
)
_UNRECOGNIZED = re.compile(r"unrecognized arguments: (.+)$")
_VLLM_VERSION = re.compile(r"vLLM API server version (\d+\.\d+\.\d+)|V1 LLM engine \(v(\d+\.\d+\.\d+)")


@dataclass(frozen=True)
class LintAdvice:
    """What lint says about the setting a log shows refused."""

    setting: str
    release: str
    finding: str  # lint's class: rejected, dead, unknown, ...
    reason: str
    fix: str

    def text(self) -> str:
        return (
            f"lint at vllm-ascend {self.release}: {self.setting} is {self.finding} ({self.reason}); fix: {self.fix}. "
            "Lint the whole serving command the same way: ascend-workbench lint YOUR_COMMAND --release TAG"
        )


def refused_command(text: str) -> str | None:
    """The smallest command carrying the setting the log says was refused, or None when it names none."""
    for line in text.splitlines():
        unrecognized = _UNRECOGNIZED.search(line)
        if unrecognized:
            flags = [w for w in unrecognized.group(1).split() if w.startswith("-")]
            if flags:
                return "vllm serve MODEL " + " ".join(flags)
        for pattern, written in _REFUSALS:
            match = pattern.search(line)
            if match and written:
                setting = written.format(*match.groups())
                return setting + " vllm serve MODEL" if "=" in setting.split()[0] else "vllm serve MODEL " + setting
    return None


def release_in(text: str) -> str | None:
    """The vllm-ascend release a log's vLLM version pairs with (the newest such tag), or None."""
    match = _VLLM_VERSION.search(text)
    if not match:
        return None
    version = match.group(1) or match.group(2)
    from workbench.truth.table import config_table

    table = config_table()
    paired = [tag for tag in table.tags if version in table.pairs.get(tag.lstrip("v"), ())]
    return paired[-1] if paired else None


def lint_advice(text: str) -> LintAdvice | None:
    """Lint's finding on the setting the log says was refused, or None (no setting named, or lint finds
    nothing wrong with it at that release)."""
    command = refused_command(text)
    if command is None:
        return None
    from workbench.lint.api import lint_parsed
    from workbench.lint.command import parse_text

    report = lint_parsed(parse_text(command, "the refused setting"), release=release_in(text))
    flagged = [f for f in report.findings if f.severity.value != "pass"]
    if not flagged:
        return None
    finding: Any = flagged[0]
    return LintAdvice(finding.setting, report.target.release, finding.finding.value, finding.reason, finding.fix)
