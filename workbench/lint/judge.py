"""Judge each setting of a serving command against one vllm-ascend release (docs/METHOD.md §2, §16).

The facts are the config-truth table (`workbench.truth.table`): what the release's source
reads, where, with which type and default, and the platform's rules. One finding per setting, in a
fixed order of questions:

1. is it read at this release at all (else: renamed, dead, not yet read, unknown or a foreign name)?
2. is it a name the release only keeps for compatibility (fallback variable, deprecated alias), or one
   only the build reads (misuse)?
3. does its value survive: a 0/1 variable given `true` crashes start-up, a boolean key given the text
   `"false"` is truthy, and the platform may reject or rewrite a value or require another setting;
4. otherwise it is ok (with its default and, where the code changed what a value means, the meaning).

A setting given twice is reported once as `duplicate` at the overridden place, then judged where it
takes effect.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from workbench.truth.table import (
    MAIN,
    ConfigTable,
    Rule,
    SettingKind,
    Span,
    VllmVersion,
    same_value,
)
from workbench.lint.command import Occurrence, ParsedInput
from workbench.lint.findings import Finding, FindingKind
from workbench.results.verdict import Verdict

_INT_TYPES = {"int01": "0 or 1", "int": "an integer"}
# Model families a checkpoint's directory name commonly carries; a name with one of them and none of a
# feature's listed types is judged, a name with none is said to be unknown.
_MODEL_FAMILIES = (
    "qwen",
    "llama",
    "deepseek",
    "glm",
    "mistral",
    "mixtral",
    "gemma",
    "phi",
    "pangu",
    "kimi",
    "minimax",
    "internlm",
    "baichuan",
    "yi-",
    "hunyuan",
    "ernie",
)
_FALSY_TEXT = {"false", "0", "no", "off", "none", ""}


@dataclass(frozen=True)
class Target:
    """The release a command is judged against, and the vLLM it runs on."""

    tag: str  # a tag of the table or 'main'
    release: str  # as the user named it ('v0.11.0', 'main')
    basis: str  # why this release
    vllm: tuple[VllmVersion, ...]
    vllm_basis: str

    @property
    def vllm_label(self) -> str:
        return "/".join(v.version for v in self.vllm) or "unknown"


def _flag_in(flag: str, versions: Iterable[VllmVersion]) -> bool:
    for version in versions:
        if flag in version.flags:
            return True
        if flag.startswith("--no-") and "--" + flag[5:] in version.flags:
            return True  # BooleanOptionalAction's negative form
        if flag == "-O" and "--optimization-level" in version.flags:
            return True
    return False


class Judge:
    def __init__(self, table: ConfigTable, target: Target, parsed: ParsedInput):
        self.table = table
        self.target = target
        self.parsed = parsed
        self.tag = target.tag
        self._reported_unknown: set[str] = set()

    # -- entry --------------------------------------------------------------------------------------

    def run(self) -> list[Finding]:
        findings: list[Finding] = []
        self._normalise_aliases()
        occurrences = self.parsed.occurrences
        last = {o.setting: i for i, o in enumerate(occurrences)}
        for i, occ in enumerate(occurrences):
            if last[occ.setting] != i:
                winner = occurrences[last[occ.setting]]
                same = winner.value == occ.value
                findings.append(
                    self._finding(
                        occ,
                        FindingKind.DUPLICATE,
                        Verdict.WARNING,
                        f"set again on line {winner.line}"
                        + (" to the same value" if same else f" to {winner.value!r}, which wins"),
                        fix="remove this one",
                        migrate=("", None),
                    )
                )
                continue
            finding = self.judge(occ)
            if finding is not None:
                findings.append(finding)
        findings.extend(self._missing_requirements(findings))
        return findings

    def _normalise_aliases(self) -> None:
        """`-tp 4` is `--tensor-parallel-size 4` (the vLLM the release runs on says which short forms exist)."""
        aliases: dict[str, str] = {}
        for version in self.target.vllm:
            aliases.update(version.aliases)
        flags = set().union(*(v.flags for v in self.target.vllm)) if self.target.vllm else set()
        normalised = []
        for o in self.parsed.occurrences:
            if o.kind == "flag" and o.name in aliases:
                o = replace(o, setting=f"flag.{aliases[o.name]}", spelled=o.spelled or o.name)
            elif o.kind == "flag" and o.name.startswith("--no-") and o.name not in flags and "--" + o.name[5:] in flags:
                # BooleanOptionalAction: --no-enable-prefix-caching is --enable-prefix-caching set to false
                o = replace(o, setting=f"flag.--{o.name[5:]}", value="false", spelled=o.spelled or o.name)
            normalised.append(o)
        self.parsed.occurrences[:] = normalised

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

    # -- shared pieces ----------------------------------------------------------------------------

    def _finding(
        self,
        occ: Occurrence,
        kind: FindingKind,
        severity: Verdict,
        reason: str,
        fix: str = "",
        cite: str = "",
        migrate: tuple[str, Any] | None = None,
        setting: str | None = None,
    ) -> Finding:
        return Finding(
            setting=setting or occ.setting,
            value=occ.value,
            release=self.target.release,
            release_basis=self.target.basis,
            finding=kind,
            severity=severity,
            reason=reason,
            fix=fix,
            cite=cite,
            line=occ.line,
            migrate=migrate,
        )

    def _present(self, setting: str) -> bool:
        return any(o.setting == setting for o in self.parsed.occurrences)

    def _holds(self, condition: Any, value: Any, present: bool = True) -> bool:
        return condition.holds(value, present, tuple(v.version for v in self.target.vllm))

    def _rules(self, occ: Occurrence) -> Finding | None:
        """The platform's reject / rewrite / model-list rules for this value (requires: at the end)."""
        for rule, span in self.table.rules_for(occ.setting, self.tag):
            if rule.action == "requires" or not self._holds(rule.when, occ.value):
                continue
            if any(self._holds(c, self.parsed.value_of(c.setting), self._present(c.setting)) for c in rule.unless):
                continue
            if not all(self._holds(c, self.parsed.value_of(c.setting), self._present(c.setting)) for c in rule.also):
                continue
            model = (self.parsed.model or "").lower()
            if rule.models and not any(m in model for m in rule.models):
                continue
            evidence = f" (reports: {', '.join(rule.evidence)})" if rule.evidence else ""
            if rule.action == "reject":
                return self._finding(
                    occ, FindingKind.REJECTED, Verdict.ERROR, rule.reason + evidence,
                    fix=self._reject_fix(rule), cite=span.cite,
                )  # fmt: skip
            if rule.action == "rewrite":
                given = "the flag" if occ.value is None else repr(occ.value)
                return self._finding(
                    occ, FindingKind.REWRITTEN, Verdict.WARNING,
                    f"{rule.reason}: {given} becomes {rule.to!r}" + evidence,
                    fix="remove it (the platform undoes it)" if occ.value is None
                    else f"set {occ.name} = {rule.to} to say what runs, or pick a release that keeps {occ.value}",
                    cite=span.cite, migrate=("", None) if occ.value is None else None,
                )  # fmt: skip
            if rule.action == "model_list":
                found = self._model_list(occ, rule, span)
                if found is not None:
                    return found
            if rule.action == "broken":
                return self._finding(
                    occ, FindingKind.KNOWN_BROKEN, Verdict.ERROR, f"{rule.reason} ({span.cite})",
                    fix=str(rule.to or "avoid this value on this release"), cite=span.cite,
                )  # fmt: skip
        return None

    def _model_list(self, occ: Occurrence, rule: Rule, span: Span) -> Finding | None:
        """A feature limited to model types whose names contain one of the listed words."""
        models = [str(m).lower() for m in span.get("models", [])]
        model = (self.parsed.model or "").rstrip("/").rsplit("/", 1)[-1].lower()
        listed = ", ".join(models)
        if model and any(m in model for m in models):
            return None
        if model and any(family in model for family in _MODEL_FAMILIES):
            return self._finding(
                occ, FindingKind.REJECTED, Verdict.ERROR,
                f"{rule.reason} ({listed}); the model {self.parsed.model} is not one of them",
                fix="remove it for this model, or use a release whose list has it", cite=span.cite,
            )  # fmt: skip
        return self._finding(
            occ, FindingKind.REQUIRED_MISSING, Verdict.WARNING,
            f"{rule.reason} ({listed}); the model type cannot be read from the command, so check yours",
            fix=f"use it only with model types containing: {listed}", cite=span.cite,
        )  # fmt: skip

    def _reject_fix(self, rule: Rule) -> str:
        if rule.unless:
            return "remove it, or " + " or ".join(c.describe() for c in rule.unless)
        return "remove it"

    def _missing_requirements(self, findings: list[Finding]) -> list[Finding]:
        """A setting that needs another one: the finding is on the setting that is missing. A renamed
        setting is checked under its new name too: the migration will need the same company."""
        found, seen = [], set()
        moved = [
            replace(o, setting=f.migrate[0])
            for f in findings
            if f.finding is FindingKind.RENAMED and f.migrate and f.migrate[0]
            for o in self.parsed.occurrences
            if o.setting == f.setting and o.line == f.line
        ]
        for occ in [*self.parsed.occurrences, *moved]:
            for rule, span in self.table.rules_for(occ.setting, self.tag):
                if rule.action != "requires" or not rule.requires or not self._holds(rule.when, occ.value):
                    continue
                if any(
                    self._holds(c, self.parsed.value_of(c.setting), self._present(c.setting)) for c in rule.requires
                ):
                    continue
                need = rule.requires[0]
                if (need.setting, rule.id) in seen:
                    continue
                seen.add((need.setting, rule.id))
                value = need.equals if need.equals is not None else (need.among[0] if need.among else True)
                others = " or ".join(c.describe() for c in rule.requires)
                found.append(
                    replace(
                        self._finding(
                            occ, FindingKind.REQUIRED_MISSING, Verdict.ERROR,
                            f"{occ.setting} = {occ.value!r} needs {others}: {rule.reason}",
                            fix=_how_to_set(need.setting, value), cite=span.cite, migrate=None, setting=need.setting,
                        ),
                        value=self.parsed.value_of(need.setting),
                        migrate=(need.setting, value),
                    )
                )  # fmt: skip
        return found

    def _did_you_mean(self, name: str, candidates: Iterable[str]) -> str | None:
        close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.75)
        return close[0] if close else None

    def _absent(
        self, occ: Occurrence, spans: tuple[Span, ...], what: str, severity: Verdict = Verdict.ERROR
    ) -> Finding:
        """A table setting with no span at this tag: dead (read before), or not read yet (read later)."""
        index = self.table.index(self.tag)
        before = [s for s in spans if self.table.index(s.last) < index]
        if before:
            last = before[-1]
            removed = last.get("removed_after") or {}
            how = ""
            if removed.get("commit"):
                how = f"; removed in {removed['commit']} ({removed.get('subject', '')}) before {removed['tag']}"
            return self._finding(
                occ, FindingKind.DEAD, severity,
                f"{what} is not read at {self.target.release}: last read at {last.last}{how}",
                fix="remove it (it does nothing on this release)", cite=last.cite, migrate=("", None),
            )  # fmt: skip
        first = spans[0]
        return self._finding(
            occ, FindingKind.UNKNOWN, severity,
            f"{what} is not read yet at {self.target.release}: first read at {first.first}",
            fix=f"upgrade to {first.first} or later, or remove it", cite=first.cite, migrate=("", None),
        )  # fmt: skip

    # -- environment variables ------------------------------------------------------------------

    def _env(self, occ: Occurrence) -> Finding:
        name = occ.name
        item = self.table.settings.get(occ.setting)
        ruled = self._rules(occ)
        owner = self.table.owner_of(name)
        if owner is not None and owner.owner not in ("vLLM", "ascend-workbench") and ruled is None:
            span = self.table.span_at(item.spans, self.tag) if item is not None else None
            tie = self._cuda_tie(occ, "env", name)
            if tie is not None:
                return tie
            also = "; vllm-ascend reads it too" if span is not None else ""
            return self._finding(
                occ, FindingKind.FOREIGN, Verdict.PASS, f"{owner.owner}'s variable ({owner.source}){also}",
                cite=span.cite if span is not None else "",
            )  # fmt: skip
        if item is not None:
            span = self.table.span_at(item.spans, self.tag)
            if span is not None and span.get("where") == "vllm_envs":
                return ruled or self._finding(
                    occ, FindingKind.OK, Verdict.PASS,
                    "vLLM's variable, which vllm-ascend reads itself at this release", cite=span.cite,
                )  # fmt: skip
            if span is None:
                rename = self.table.rename_from(occ.setting)
                if rename is not None and self.table.setting_at(rename.new, self.tag) is not None:
                    value = _env_value_as_json(occ.value, str(item.spans[-1].get("type")))
                    return self._finding(
                        occ, FindingKind.RENAMED, Verdict.ERROR,
                        f"{name} is not read at {self.target.release}; {rename.new} takes its place"
                        + (f" ({rename.note})" if rename.note else ""),
                        fix=f"set {rename.new} = {value!r}", cite=self.table.setting_at(rename.new, self.tag).cite,
                        migrate=(rename.new, value),
                    )  # fmt: skip
                if ruled is not None:
                    return ruled
                if name.startswith("VLLM_") and not name.startswith("VLLM_ASCEND_"):
                    return self._vllm_env(occ)
                return self._absent(occ, item.spans, f"vllm-ascend variable {name}")
            if span.get("where") == "direct":
                owner = self.table.owner_of(name)
                if ruled is not None:
                    return ruled
                if owner is not None and owner.owner != "vLLM":
                    return self._finding(
                        occ, FindingKind.FOREIGN, Verdict.PASS,
                        f"{owner.owner}'s variable; vllm-ascend also reads it", cite=span.cite,
                    )  # fmt: skip
                if name.startswith("VLLM_") and not name.startswith("VLLM_ASCEND_"):
                    return self._vllm_env(occ, also=span.cite)
                return self._finding(occ, FindingKind.OK, Verdict.PASS, "read by vllm-ascend", cite=span.cite)
            return ruled or self._env_in_table(occ, item.build_time, span)
        if ruled is not None:
            return ruled
        if name.startswith("VLLM_ASCEND_"):
            names = [s.split(".", 1)[1] for s in self.table.names_at(SettingKind.ENV, self.tag)]
            return self._unknown_env(occ, f"vllm-ascend {self.target.release}", names)
        if name.startswith("VLLM_"):
            return self._vllm_env(occ)
        tie = self._cuda_tie(occ, "env", name)
        if tie is not None:
            return tie
        owner = self.table.owner_of(name)
        if owner is not None:
            return self._finding(occ, FindingKind.FOREIGN, Verdict.PASS, f"{owner.owner}'s variable ({owner.source})")
        names = [s.split(".", 1)[1] for s in self.table.names_at(SettingKind.ENV, self.tag)]
        close = self._did_you_mean(name, names)
        if close:
            return self._finding(
                occ, FindingKind.UNKNOWN, Verdict.ERROR,
                f"nothing on the stack reads {name}; vllm-ascend {self.target.release} reads {close}",
                fix=f"use {close}", migrate=(f"env.{close}", occ.value),
            )  # fmt: skip
        return self._finding(
            occ, FindingKind.UNKNOWN, Verdict.WARNING,
            f"neither vllm-ascend {self.target.release}, vLLM {self.target.vllm_label} nor a component the "
            "table knows (CANN, HCCL, torch_npu, ...) reads {name}; your own scripts may",
            fix="keep it only if your own code reads it",
        )  # fmt: skip

    def _env_in_table(self, occ: Occurrence, build_time: bool, span: Span) -> Finding:
        name = occ.name
        status = span.status
        if build_time:
            return self._finding(
                occ, FindingKind.MISUSE, Verdict.WARNING,
                f"{name} is read only when vllm-ascend is built (setup.py); a serving command changes nothing",
                fix="set it when you build or install vllm-ascend, not when you serve", cite=span.cite,
                migrate=("", None),
            )  # fmt: skip
        expected = _INT_TYPES.get(str(span.get("type")))
        if expected and occ.value is not None and not _is_int(occ.value):
            return self._finding(
                occ, FindingKind.REJECTED, Verdict.ERROR,
                f"{name} is parsed with int(): {occ.value!r} raises ValueError at start-up; it takes {expected}",
                fix=f"{name}={_as_int(occ.value)}" if _as_int(occ.value) is not None else f"set {expected}",
                cite=span.cite,
                migrate=(occ.setting, str(_as_int(occ.value))) if _as_int(occ.value) is not None else None,
            )  # fmt: skip
        if status == "fallback":
            successor = str(span.get("successor"))
            also = self._present(successor)
            value = _env_value_as_json(occ.value, str(span.get("type")))
            reason = f"{name} is read at {self.target.release} only as the fallback of {successor}" + (
                "; that key is set too, so this variable is ignored" if also else ""
            )
            return self._finding(
                occ, FindingKind.DEPRECATED, Verdict.WARNING, reason + "; the variable is slated for removal",
                fix=f"set {successor} = {value!r} in --additional-config", cite=span.cite,
                migrate=(successor, value),
            )  # fmt: skip
        if status == "deprecated":
            return self._finding(
                occ, FindingKind.DEPRECATED, Verdict.WARNING,
                f"{name} is marked deprecated at {self.target.release}", fix="plan its removal", cite=span.cite,
            )  # fmt: skip
        meaning = span.get("meaning")
        default = span.get("default")
        detail = f"; means: {meaning}" if meaning else ""
        return self._finding(
            occ, FindingKind.OK, Verdict.PASS,
            f"read by vllm-ascend (default {default!r}){detail}", cite=span.cite,
        )  # fmt: skip

    def _vllm_env(self, occ: Occurrence, also: str = "") -> Finding:
        name = occ.name
        versions = self.target.vllm
        tie = self._cuda_tie(occ, "env", name)
        if versions and any(name in v.envs for v in versions):
            if tie is not None:
                return tie
            extra = f"; vllm-ascend reads it too ({also})" if also else ""
            return self._finding(
                occ, FindingKind.FOREIGN, Verdict.PASS,
                f"vLLM's variable (read by vLLM {self.target.vllm_label}){extra}",
                cite=versions[0].cite,
            )  # fmt: skip
        if not versions:
            return self._finding(
                occ, FindingKind.FOREIGN, Verdict.PASS,
                f"vLLM's variable; which vLLM {self.target.release} runs on is not known, so it is not checked",
            )  # fmt: skip
        known = [v for v in self.table.vllm_versions() if name in v.envs]
        from packaging.version import Version

        now = max(Version(v.version) for v in versions)
        older = [v for v in known if Version(v.version) < now]
        if older:
            return self._finding(
                occ, FindingKind.DEAD, Verdict.ERROR,
                f"vLLM {self.target.vllm_label} no longer reads {name} (last read by vLLM {older[-1].version})",
                fix="remove it", cite=older[-1].cite, migrate=("", None),
            )  # fmt: skip
        if known:
            return self._finding(
                occ, FindingKind.UNKNOWN, Verdict.ERROR,
                f"vLLM {self.target.vllm_label} does not read {name} yet (first read by vLLM {known[0].version})",
                fix="remove it", migrate=("", None),
            )  # fmt: skip
        if tie is not None:
            return tie
        return self._unknown_env(occ, f"vLLM {self.target.vllm_label}", set().union(*(v.envs for v in versions)))

    def _unknown_env(self, occ: Occurrence, reader: str, known: Iterable[str]) -> Finding:
        """A variable `reader` does not read: an error, with the closest name it does read as the fix."""
        name = occ.name
        close = self._did_you_mean(name, known)
        hint = f"; did you mean {close}?" if close else ""
        return self._finding(
            occ, FindingKind.UNKNOWN, Verdict.ERROR, f"{reader} reads no variable {name}{hint}",
            fix=f"use {close}" if close else "remove it (it does nothing)",
            migrate=(f"env.{close}", occ.value) if close else ("", None),
        )  # fmt: skip

    def _cuda_tie(self, occ: Occurrence, kind: str, name: str, value: str | None = None) -> Finding | None:
        from workbench.scan.api import cuda_tie

        found = cuda_tie(kind, name, value)
        if found is None:
            return None
        rule_id, row = found
        return self._finding(
            occ, FindingKind.FOREIGN, Verdict.WARNING,
            f"a CUDA setting ({row.detects}; scan rule {rule_id}): it does nothing on Ascend",
            fix=row.counterpart, cite=row.cite[0] if row.cite else "",
        )  # fmt: skip

    # -- flags ------------------------------------------------------------------------------------

    def _flag(self, occ: Occurrence) -> Finding:
        flag = occ.name
        versions = self.target.vllm
        ruled = self._rules(occ)
        if ruled is not None:
            return ruled
        if not versions:
            return self._finding(
                occ, FindingKind.OK, Verdict.PASS,
                f"vLLM flag; which vLLM {self.target.release} runs on is not known, so it is not checked",
            )  # fmt: skip
        if _flag_in(flag, versions):
            tie = self._cuda_tie(occ, "option", flag, occ.value)
            if tie is not None:
                return tie
            if any(flag in v.deprecated_flags for v in versions):
                return self._finding(
                    occ, FindingKind.DEPRECATED, Verdict.WARNING,
                    f"vLLM {self.target.vllm_label} still takes {flag} but marks it deprecated",
                    fix="drop it, or move to its replacement in vLLM's --help", cite=versions[0].cite,
                )  # fmt: skip
            return self._finding(occ, FindingKind.OK, Verdict.PASS, f"vLLM {self.target.vllm_label} flag")
        from packaging.version import Version

        now = max(Version(v.version) for v in versions)
        known = [v for v in self.table.vllm_versions() if _flag_in(flag, [v])]
        older = [v for v in known if Version(v.version) < now]
        if older:
            return self._finding(
                occ, FindingKind.DEAD, Verdict.ERROR,
                f"vLLM {self.target.vllm_label} has no {flag} (last in vLLM {older[-1].version}); "
                "its argument parser refuses the command",
                fix="remove it", cite=older[-1].cite, migrate=("", None),
            )  # fmt: skip
        if known:
            return self._finding(
                occ, FindingKind.UNKNOWN, Verdict.ERROR,
                f"vLLM {self.target.vllm_label} has no {flag} yet (first in vLLM {known[0].version})",
                fix="remove it", migrate=("", None),
            )  # fmt: skip
        pool = set().union(*(v.flags for v in versions))
        expands = sorted(f for f in pool if f.startswith(flag) and flag.startswith("--"))
        if len(expands) == 1:  # argparse (allow_abbrev) takes a unique prefix as the whole flag
            return self._finding(
                occ, FindingKind.MISUSE, Verdict.WARNING,
                f"vLLM's parser expands the abbreviation {flag} to {expands[0]}; a later vLLM with another flag "
                "that starts the same way refuses it",
                fix=f"write {expands[0]}", migrate=(f"flag.{expands[0]}", occ.value),
            )  # fmt: skip
        if len(expands) > 1:
            return self._finding(
                occ, FindingKind.REJECTED, Verdict.ERROR,
                f"{flag} abbreviates several vLLM {self.target.vllm_label} flags ({', '.join(expands[:4])}): "
                "its argument parser refuses the ambiguous option",
                fix=f"write one of {', '.join(expands[:4])} in full",
            )  # fmt: skip
        close = self._did_you_mean(flag, pool)
        hint = f"; did you mean {close}?" if close else ""
        return self._finding(
            occ, FindingKind.REJECTED, Verdict.ERROR,
            f"vLLM {self.target.vllm_label} has no flag {flag}{hint}: its argument parser refuses the command",
            fix=f"use {close}" if close else "remove it",
            migrate=(f"flag.{close}", occ.value) if close else ("", None),
        )  # fmt: skip

    # -- additional_config ------------------------------------------------------------------------

    def _additional(self, occ: Occurrence) -> Finding | None:
        path = occ.setting
        item = self.table.settings.get(path)
        span = self.table.span_at(item.spans, self.tag) if item else None
        if span is not None:
            return self._rules(occ) or self._additional_read(occ, span)
        rename = self.table.rename_from(path)
        if rename is not None and self.table.setting_at(rename.new, self.tag) is not None:
            return self._finding(
                occ, FindingKind.RENAMED, Verdict.ERROR,
                f"{path} is not read at {self.target.release}; the value now goes to {rename.new}",
                fix=f"move it to {rename.new}", cite=self.table.setting_at(rename.new, self.tag).cite,
                migrate=(rename.new, occ.value),
            )  # fmt: skip
        # the highest ancestor that is unknown here is the one to report (once)
        parts = path.split(".")
        for depth in range(2, len(parts) + 1):
            prefix = ".".join(parts[:depth])
            if prefix == path:
                break
            ancestor = self.table.settings.get(prefix)
            ancestor_span = self.table.span_at(ancestor.spans, self.tag) if ancestor else None
            if ancestor_span is not None and not self.table.children_at(prefix, self.tag):
                return self._finding(
                    occ, FindingKind.OK, Verdict.PASS,
                    f"inside {prefix}, which vllm-ascend reads as a whole (keys beneath it are not checked)",
                    cite=ancestor_span.cite,
                )  # fmt: skip
            if ancestor is None or ancestor_span is None:
                if prefix in self._reported_unknown:
                    return None
                if ancestor is not None or self._is_known_anywhere(prefix):
                    self._reported_unknown.add(prefix)
                    return self._absent_section(occ, prefix)
                self._reported_unknown.add(prefix)
                return self._unknown_key(occ, prefix)
        if item is not None:
            section = path.rsplit(".", 1)[0]
            policy = self.table.section_at(section, self.tag)
            if policy is not None and policy.get("unknown_keys") == "rejected":
                return self._finding(
                    occ, FindingKind.REJECTED, Verdict.ERROR,
                    f"{section} rejects keys it does not know at {self.target.release}, and {path} is not one "
                    f"(last read at {item.spans[-1].last})",
                    fix="remove it", cite=policy.cite, migrate=("", None),
                )  # fmt: skip
            return self._absent(occ, item.spans, path)
        return self._unknown_key(occ, path)

    def _is_known_anywhere(self, prefix: str) -> bool:
        return any(s.startswith(prefix + ".") for s in self.table.settings)

    def _absent_section(self, occ: Occurrence, prefix: str) -> Finding:
        item = self.table.settings.get(prefix)
        spans = item.spans if item else ()
        if not spans:
            children = [s for s in self.table.settings.values() if s.setting.startswith(prefix + ".")]
            spans = tuple(sorted((sp for c in children for sp in c.spans), key=lambda s: self.table.index(s.first)))
        rename = self.table.rename_from(prefix)
        if rename is not None and self.table.setting_at(rename.new, self.tag) is not None:
            value = _subtree(self.parsed, prefix)
            return replace(
                self._finding(
                    occ, FindingKind.RENAMED, Verdict.ERROR, f"{prefix} now goes to {rename.new}",
                    fix=f"move it to {rename.new}", migrate=(rename.new, value), setting=prefix,
                ),
                value=value,
            )  # fmt: skip
        return replace(
            self._absent(occ, spans, prefix), setting=prefix, value=_subtree(self.parsed, prefix), migrate=("", None)
        )

    def _unknown_key(self, occ: Occurrence, path: str) -> Finding:
        section, _, key = path.rpartition(".")
        siblings = [s.rsplit(".", 1)[1] for s in self.table.children_at(section, self.tag)]
        close = self._did_you_mean(key, siblings)
        if close is None:  # the right key at the wrong level?
            same_leaf = [
                s for s in self.table.names_at(SettingKind.ADDITIONAL_CONFIG, self.tag) if s.endswith("." + key)
            ]
            moved = same_leaf[0] if len(same_leaf) == 1 else None
        else:
            moved = f"{section}.{close}"
        hint = f"; did you mean {moved}?" if moved else ""
        policy = self.table.section_at(section, self.tag)
        rule = policy.get("unknown_keys") if policy else "ignored"
        value = occ.value if path == occ.setting else _subtree(self.parsed, path)
        if rule == "rejected":
            return replace(
                self._finding(
                        occ, FindingKind.REJECTED, Verdict.ERROR,
                        f"{section} rejects keys it does not know at {self.target.release}; {key} is not one{hint}",
                        fix=f"use {moved}" if moved else "remove it", cite=policy.cite if policy else "",
                        migrate=(moved, value) if moved else ("", None), setting=path,
                ),
                value=value,
            )  # fmt: skip
        silently = " and ignores it without a word" if rule == "ignored" else " and warns"
        return replace(
                self._finding(
                    occ, FindingKind.UNKNOWN, Verdict.ERROR,
                    f"vllm-ascend {self.target.release} reads no {path}{silently}{hint}",
                    fix=f"use {moved}" if moved else "remove it (it does nothing)",
                    cite=policy.cite if policy else "", migrate=(moved, value) if moved else ("", None),
                    setting=path,
                ),
                value=value,
        )  # fmt: skip

    def _additional_read(self, occ: Occurrence, span: Span) -> Finding:
        path = occ.setting
        status = span.status
        if status == "rejected":
            rename = self.table.rename_from(path)
            return self._finding(
                occ, FindingKind.REJECTED, Verdict.ERROR,
                f"start-up refuses {path} at {self.target.release} (the key was removed and is checked for)",
                fix=f"move it to {rename.new}" if rename else "remove it", cite=span.cite,
                migrate=(rename.new, occ.value) if rename else ("", None),
            )  # fmt: skip
        if status == "deprecated":
            successor = span.get("successor")
            return self._finding(
                occ, FindingKind.DEPRECATED, Verdict.WARNING,
                f"{path} still works at {self.target.release} but is deprecated"
                + (f" in favour of {successor}" if successor else ""),
                fix=f"move it to {successor}" if successor else "plan its removal", cite=span.cite,
                migrate=(successor, occ.value) if successor else None,
            )  # fmt: skip
        allowed = span.get("values")
        if allowed and not any(same_value(occ.value, v) for v in allowed):
            return self._finding(
                occ, FindingKind.REJECTED, Verdict.ERROR,
                f"start-up raises for {path} = {occ.value!r}: {self.target.release} accepts only {allowed}",
                fix=f"one of {allowed}", cite=span.cite,
            )  # fmt: skip
        kind = span.get("type")
        if kind == "bool" and isinstance(occ.value, str):
            falsy = occ.value.strip().lower() in _FALSY_TEXT
            return self._finding(
                occ, FindingKind.MISUSE, Verdict.ERROR if falsy else Verdict.WARNING,
                f"{path} is a boolean and {occ.value!r} is text: vllm-ascend tests it for truth, so any non-empty "
                "text turns it on" + (" (this one reads as off but runs as on)" if falsy else ""),
                fix=f"write {str(not falsy).lower()} without quotes", cite=span.cite,
                migrate=(path, not falsy),
            )  # fmt: skip
        meaning = span.get("meaning")
        detail = f"; means: {meaning}" if meaning else ""
        return self._finding(
            occ, FindingKind.OK, Verdict.PASS, f"read by vllm-ascend (default {span.get('default')!r}){detail}",
            cite=span.cite,
        )  # fmt: skip

    # -- compilation_config -----------------------------------------------------------------------

    def _compilation(self, occ: Occurrence) -> Finding | None:
        key = occ.name.split(".", 1)[0]
        top = f"compilation_config.{key}"
        if top != occ.setting:
            if top in self._reported_unknown:
                return None
        ruled = self._rules(occ)
        if ruled is not None:
            return ruled
        versions = self.target.vllm
        if not versions:
            return self._finding(
                occ, FindingKind.OK, Verdict.PASS,
                f"vLLM compilation_config key; which vLLM {self.target.release} runs on is not known",
            )  # fmt: skip
        if any(key in v.compilation_keys for v in versions):
            tie = self._cuda_tie(occ, "option", key, None if isinstance(occ.value, (dict, list)) else str(occ.value))
            reason = f"vLLM {self.target.vllm_label} CompilationConfig field"
            if tie is not None:
                reason += f"; on Ascend: {tie.fix}"
            return self._finding(occ, FindingKind.OK, Verdict.PASS, reason)
        from packaging.version import Version

        now = max(Version(v.version) for v in versions)
        known = [v for v in self.table.vllm_versions() if key in v.compilation_keys]
        self._reported_unknown.add(top)
        if [v for v in known if Version(v.version) < now]:
            last = [v for v in known if Version(v.version) < now][-1]
            return self._finding(
                occ, FindingKind.DEAD, Verdict.ERROR,
                f"vLLM {self.target.vllm_label}'s CompilationConfig has no {key} (last in vLLM {last.version}); "
                "start-up fails on an unknown field",
                fix="remove it", cite=last.cite, migrate=("", None), setting=top,
            )  # fmt: skip
        pool = set().union(*(v.compilation_keys for v in versions))
        close = self._did_you_mean(key, pool)
        hint = f"; did you mean {close}?" if close else ""
        return self._finding(
            occ, FindingKind.UNKNOWN, Verdict.ERROR,
            f"vLLM {self.target.vllm_label}'s CompilationConfig has no field {key}{hint}; start-up fails on it",
            fix=f"use {close}" if close else "remove it",
            migrate=(f"compilation_config.{close}", occ.value) if close else ("", None), setting=top,
        )  # fmt: skip


def _how_to_set(setting: str, value: Any) -> str:
    kind, _, name = setting.partition(".")
    if kind == "env":
        return f"export {name}={str(value).lower() if isinstance(value, bool) else value}"
    if kind == "flag":
        return f"add {name} {value}" if value is not True else f"add {name}"
    return f"set {setting} = {json.dumps(value)} (--{kind.replace('_', '-')})"


def _is_int(value: Any) -> bool:
    try:
        int(str(value).strip())
        return True
    except ValueError:
        return False


def _as_int(value: Any) -> int | None:
    text = str(value).strip().lower()
    return {"true": 1, "yes": 1, "on": 1, "false": 0, "no": 0, "off": 0}.get(text)


def _env_value_as_json(value: Any, kind: str) -> Any:
    """A variable's text as the additional_config key it moves to expects it."""
    text = str(value).strip()
    if kind == "int01":
        number = _as_int(text) if not _is_int(text) else int(text)
        return bool(number) if number is not None else text
    if kind == "int" and _is_int(text):
        return int(text)
    if kind == "text_lower":
        return text.lower()
    return text


def _subtree(parsed: ParsedInput, path: str) -> Any:
    """The JSON value at `path` in the command's config arguments (for reporting a whole unknown section)."""
    section, _, rest = path.partition(".")
    for config in parsed.configs:
        if config.section != section:
            continue
        node: Any = config.value
        for part in rest.split("."):
            if not isinstance(node, dict) or part not in node:
                node = None
                break
            node = node[part]
        if node is not None:
            return node
    return None


def judge(parsed: ParsedInput, table: ConfigTable, target: Target) -> list[Finding]:
    return Judge(table, target, parsed).run()


__all__ = ["MAIN", "Target", "judge"]
