"""The shared pieces of one judgement: the order of questions, the finding record, the platform's rules
(reject, rewrite, requires, a model list, known-broken reports) and what a setting absent at a tag means.

`workbench.lint.judge` composes these with the questions of each kind of setting (`judge_env`,
`judge_flags`, `judge_config`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from packaging.version import Version

from workbench.lint.command import Occurrence, ParsedInput
from workbench.lint.findings import Finding, FindingKind
from workbench.lint.models import ModelIdentity, identify
from workbench.lint.values import how_to_set
from workbench.results.verdict import Verdict
from workbench.truth.table import ConfigTable, Rule, Span, VllmVersion


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


class JudgeBase:
    """The shared pieces of a judgement: the order of questions, findings, the platform's rules."""

    def __init__(self, table: ConfigTable, target: Target, parsed: ParsedInput, model: ModelIdentity | None = None):
        self.table = table
        self.target = target
        self.parsed = parsed
        self.tag = target.tag
        self.model = _with_registry(
            model or identify(served_model(parsed), parsed.value_of("flag.--served-model-name")), target
        )
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
        findings.extend(self._model_findings())
        return findings

    def _model_findings(self) -> list[Finding]:
        return []  # Judge adds the model's own findings (judge_caps)

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
        raise NotImplementedError  # Judge answers it with the questions of each kind of setting

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

    def _other_vllm_only(
        self,
        occ: Occurrence,
        known: list[VllmVersion],
        gone: str,
        not_yet: str | None = None,
        setting: str | None = None,
    ) -> Finding | None:
        """A name only other vLLMs have (`known`, oldest first): an older one had it (dead now: the message `gone`,
        citing the last vLLM that had it) or a newer one will (`not_yet`, citing none; left to the caller when
        None); both formatted with `{version}`. None when neither applies."""
        now = max(Version(v.version) for v in self.target.vllm)
        older = [v for v in known if Version(v.version) < now]
        if older:
            reason = gone.format(version=older[-1].version)
            cite = older[-1].cite
            return self._finding(occ, FindingKind.DEAD, Verdict.ERROR, reason, "remove it", cite, ("", None), setting)
        if known and not_yet is not None:
            reason = not_yet.format(version=known[0].version)
            return self._finding(occ, FindingKind.UNKNOWN, Verdict.ERROR, reason, "remove it", migrate=("", None))
        return None

    def _present(self, setting: str) -> bool:
        return any(o.setting == setting for o in self.parsed.occurrences)

    def _holds(self, condition: Any, value: Any, present: bool = True) -> bool:
        return condition.holds(value, present, tuple(v.version for v in self.target.vllm))

    def _rules(self, occ: Occurrence) -> Finding | None:
        """The platform's reject / rewrite / model-list / misuse / broken rules for this value (the first that
        holds and has something to say; requires: at the end)."""
        for rule, span in self.table.rules_for(occ.setting, self.tag):
            if rule.action != "requires" and self._rule_applies(rule, occ):
                found = self._rule_finding(occ, rule, span)
                if found is not None:
                    return found
        return None

    def _rule_applies(self, rule: Rule, occ: Occurrence) -> bool:
        if not self._holds(rule.when, occ.value):
            return False
        if any(self._holds(c, self.parsed.value_of(c.setting), self._present(c.setting)) for c in rule.unless):
            return False
        if not all(self._holds(c, self.parsed.value_of(c.setting), self._present(c.setting)) for c in rule.also):
            return False
        return self._model_fits(rule)

    def _rule_finding(self, occ: Occurrence, rule: Rule, span: Span) -> Finding | None:
        if rule.action == "model_list":
            return self._model_list(occ, rule, span)
        evidence = f" (reports: {', '.join(rule.evidence)})" if rule.evidence else ""
        if rule.action == "rewrite":
            return self._rewritten(occ, rule, span, evidence)
        # (kind, severity, reason, fix, migrate) per action that refuses or warns outright
        verdicts = {
            "reject": (FindingKind.REJECTED, Verdict.ERROR, rule.reason + evidence, self._reject_fix(rule), None),
            "misuse": (
                FindingKind.MISUSE,
                Verdict.WARNING,
                rule.reason + evidence,
                str(rule.to or "remove it"),
                ("", None),
            ),
            "broken": (
                FindingKind.KNOWN_BROKEN,
                Verdict(rule.severity),
                f"{rule.reason} ({span.cite})",
                str(rule.to or "avoid this value on this release"),
                None,
            ),
        }
        if rule.action not in verdicts:
            return None
        kind, severity, reason, fix, migrate = verdicts[rule.action]
        return self._finding(occ, kind, severity, reason, fix=fix, cite=span.cite, migrate=migrate)

    def _rewritten(self, occ: Occurrence, rule: Rule, span: Span, evidence: str) -> Finding:
        given = "the flag" if occ.value is None else repr(occ.value)
        return self._finding(
            occ,
            FindingKind.REWRITTEN,
            Verdict.WARNING,
            f"{rule.reason}: {given} becomes {rule.to!r}" + evidence,
            fix="remove it (the platform undoes it)"
            if occ.value is None
            else f"set {occ.name} = {rule.to} to say what runs, or pick a release that keeps {occ.value}",
            cite=span.cite,
            migrate=("", None) if occ.value is None else None,
        )

    def _model_fits(self, rule: Rule) -> bool:
        """Whether a rule limited to some models (names, or multimodal ones) applies to the served model;
        a model the lint cannot identify never fits a named list (no finding on a guess)."""
        if rule.models and not self.model.matches(rule.models):
            return False
        return rule.multimodal is None or self.model.multimodal is rule.multimodal

    def _model_list(self, occ: Occurrence, rule: Rule, span: Span) -> Finding | None:
        """A feature limited to model types whose names contain one of the listed words."""
        models = [str(m).lower() for m in span.get("models", [])]
        listed = ", ".join(models)
        if self.model.matches(models):
            return None
        if self.model.known:
            return self._finding(
                occ,
                FindingKind.REJECTED,
                Verdict.ERROR,
                f"{rule.reason} ({listed}); the model ({self.model.describe()}, from {self.model.basis}) is not one of them",
                fix="remove it for this model, or use a release whose list has it",
                cite=span.cite,
                migrate=("", None),
            )
        return self._finding(
            occ,
            FindingKind.REQUIRED_MISSING,
            Verdict.WARNING,
            f"{rule.reason} ({listed}); the model type cannot be read from the command, so check yours "
            "(or give the lint --model-type)",
            fix=f"use it only with model types containing: {listed}",
            cite=span.cite,
        )

    def _reject_fix(self, rule: Rule) -> str:
        if rule.setting.startswith("model.") and rule.unless:
            return "for this model: " + " or ".join(c.describe() for c in rule.unless)
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
                            occ,
                            FindingKind.REQUIRED_MISSING,
                            Verdict.ERROR,
                            f"{occ.setting} = {occ.value!r} needs {others}: {rule.reason}",
                            fix=how_to_set(need.setting, value),
                            cite=span.cite,
                            migrate=None,
                            setting=need.setting,
                        ),
                        value=self.parsed.value_of(need.setting),
                        migrate=(need.setting, value),
                    )
                )
        return found

    def _did_you_mean(self, name: str, candidates: Iterable[str], cutoff: float = 0.75) -> str | None:
        close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=cutoff)
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
                occ,
                FindingKind.DEAD,
                severity,
                f"{what} is not read at {self.target.release}: last read at {last.last}{how}",
                fix="remove it (it does nothing on this release)",
                cite=last.cite,
                migrate=("", None),
            )
        first = spans[0]
        return self._finding(
            occ,
            FindingKind.UNKNOWN,
            severity,
            f"{what} is not read yet at {self.target.release}: first read at {first.first}",
            fix=f"upgrade to {first.first} or later, or remove it",
            cite=first.cite,
            migrate=("", None),
        )


def _with_registry(model: ModelIdentity, target: Target) -> ModelIdentity:
    """The model's multimodality from vLLM's registry when its architecture is known and its config said nothing."""
    if model.multimodal is not None or not model.architectures:
        return model
    from workbench.truth.capabilities import is_multimodal

    found = [is_multimodal(target.vllm, arch) for arch in model.architectures]
    return replace(
        model, multimodal=any(f for f in found if f is not None) if any(f is not None for f in found) else None
    )


def served_model(parsed: ParsedInput) -> str | None:
    """The model a command serves: `vllm serve MODEL`, else `--model`."""
    model = parsed.model or parsed.value_of("flag.--model")
    return str(model) if model else None
