"""Judge each setting of a serving command against one vllm-ascend release (docs/METHOD.md §2, §16).

The facts are the config-truth table (`workbench.truth.table`): what the release's source reads, where,
with which type and default, and the platform's rules. One finding per setting, in a fixed order of
questions:

1. is it read at this release at all (else: renamed, dead, not yet read, unknown or a foreign name)?
2. is it a name the release only keeps for compatibility (fallback variable, deprecated alias), or one
   only the build reads (misuse)?
3. does its value survive: a 0/1 variable given `true` crashes start-up, a boolean key given the text
   `"false"` is truthy, and the platform may reject or rewrite a value or require another setting;
4. otherwise it is ok (with its default and, where the code changed what a value means, the meaning).

A setting given twice is reported once as `duplicate` at the overridden place, then judged where it
takes effect. The questions of each kind of setting live in `judge_env`, `judge_flags` and
`judge_config`; the order, the finding record and the platform's rules in `judge_base`.
"""

from __future__ import annotations

from workbench.lint.command import Occurrence, ParsedInput
from workbench.lint.findings import Finding
from workbench.lint.judge_base import JudgeBase, Target
from workbench.lint.judge_caps import CapabilityQuestions
from workbench.lint.judge_config import ConfigQuestions
from workbench.lint.judge_env import EnvQuestions
from workbench.lint.judge_flags import FlagQuestions
from workbench.lint.models import ModelIdentity
from workbench.truth.table import MAIN, ConfigTable


class Judge(EnvQuestions, FlagQuestions, ConfigQuestions, CapabilityQuestions, JudgeBase):
    """One judgement of a parsed command at one target."""

    def judge(self, occ: Occurrence) -> Finding | None:
        kind = occ.kind
        if kind == "env":
            return self._env(occ)
        if kind == "flag":
            return self._flag(occ)
        if kind == "additional_config":
            return self._additional(occ)
        if kind == "compilation_config":
            return self._compilation(occ)
        return None


def judge(parsed: ParsedInput, table: ConfigTable, target: Target, model: ModelIdentity | None = None) -> list[Finding]:
    return Judge(table, target, parsed, model).run()


__all__ = ["MAIN", "Target", "judge"]
