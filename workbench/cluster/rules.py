"""The cluster rules as data (`policy/cluster/rules.yaml`): read once, validated, each with its fix and source.

A rule names a `kind` (the check that carries it out, `workbench.cluster.check`), the settings it looks at,
its severity, the scope over which nodes are compared, the fix it prints and the source it rests on. The
file is read through the one recipe reader, so a typo names the file and the key.
"""

from __future__ import annotations

import enum
import fnmatch
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from workbench.recipes.reader import Frozen, load_recipe_file
from workbench.results.verdict import Verdict
from workbench.settings import policy_dir


class RuleKind(str, enum.Enum):
    STACK_EQUAL = "stack-equal"
    STACK_IN_MATRIX = "stack-in-matrix"
    ENV_EQUAL = "env-equal"
    ENV_DISTINCT = "env-distinct"
    CORES_DISJOINT = "cores-disjoint"
    INTERFACE_EXISTS = "interface-exists"
    ADDRESS_ON_NODE = "address-on-node"
    DATA_PARALLEL = "data-parallel"
    FLAGS_EQUAL = "flags-equal"
    HCCN_CONF = "hccn-conf"
    NPU_LINK = "npu-link"
    DEVICE_IP_UNIQUE = "device-ip-unique"
    PORTS = "ports"
    TIMEOUTS = "timeouts"
    KV_CONNECTOR = "kv-connector"
    CLOCK = "clock"


class Scope(str, enum.Enum):
    CLUSTER = "cluster"
    INSTANCE = "instance"
    HOST = "host"


class Rule(Frozen):
    id: str
    kind: RuleKind
    severity: Verdict = Verdict.ERROR
    scope: Scope = Scope.CLUSTER
    settings: tuple[str, ...] = ()
    except_: tuple[str, ...] = Field((), alias="except")
    defaults: dict[str, float] = {}
    pairs: tuple[tuple[str, str, str], ...] = ()
    limit_s: float | None = None
    fix: str
    source: str = Field(min_length=1)

    @field_validator("severity")
    @classmethod
    def _not_pass(cls, value: Verdict) -> Verdict:
        if value is Verdict.PASS:
            raise ValueError("a rule's severity is error or warning")
        return value

    def names(self, present: set[str]) -> list[str]:
        """The settings this rule covers among `present`: exact names and `VLLM_*` patterns, minus `except`."""
        wanted = [s for s in self.settings if "*" not in s]
        patterns = [s for s in self.settings if "*" in s]
        matched = {name for name in present for p in patterns if fnmatch.fnmatchcase(name, p)}
        return sorted((set(wanted) | matched) - set(self.except_))

    def render_fix(self, **values: Any) -> str:
        """The fix with its placeholders filled; a placeholder the caller did not give stays as written."""
        try:
            return self.fix.format(**values)
        except (KeyError, IndexError, ValueError):
            return self.fix


class RuleBook(Frozen):
    release: str
    rules: tuple[Rule, ...]
    source: Path | None = Field(None, exclude=True)

    def of_kind(self, kind: RuleKind) -> list[Rule]:
        return [r for r in self.rules if r.kind is kind]


def default_rules_path() -> Path:
    return policy_dir() / "cluster" / "rules.yaml"


def load_rules(path: Path | str | None = None) -> RuleBook:
    """The rule book at `path` (default policy/cluster/rules.yaml); one clear error naming file and key."""
    where = Path(path) if path else default_rules_path()
    return load_recipe_file(RuleBook, where, what="cluster rule file", required="'release' and 'rules'")


__all__ = ["Rule", "RuleBook", "RuleKind", "Scope", "default_rules_path", "load_rules"]
