"""Questions about vLLM's own settings: serving flags (known at the paired vLLM, dead, not yet there, an
abbreviation) and `compilation_config` keys (fields of vLLM's CompilationConfig)."""

from __future__ import annotations

from collections.abc import Iterable

from packaging.version import Version

from workbench.lint.command import Occurrence
from workbench.lint.findings import Finding, FindingKind
from workbench.results.verdict import Verdict
from workbench.truth.table import VllmVersion

# vLLM takes a JSON-valued flag's keys one by one (`--json-arg.key value`) from 0.9.0 on
JSON_KEYS_FROM = Version("0.9.0")
CITE_JSON_KEYS = "https://github.com/vllm-project/vllm/blob/v0.9.0/vllm/engine/arg_utils.py#L186-L190"


class FlagQuestions:
    """The vLLM-flag half of `Judge` (mixed in; uses its shared pieces)."""

    def _flag(self, occ: Occurrence) -> Finding:
        flag = occ.name
        versions = self.target.vllm
        ruled = self._rules(occ)
        if ruled is not None:
            return ruled
        if not versions:
            return self._finding(
                occ,
                FindingKind.OK,
                Verdict.PASS,
                f"vLLM flag; which vLLM {self.target.release} runs on is not known, so it is not checked",
            )
        if flag_in(flag, versions):
            refused = self._capability(occ)
            if refused is not None:
                return refused
            tie = self._cuda_tie(occ, "option", flag, occ.value)
            if tie is not None:
                return tie
            if any(flag in v.deprecated_flags for v in versions):
                return self._finding(
                    occ,
                    FindingKind.DEPRECATED,
                    Verdict.WARNING,
                    f"vLLM {self.target.vllm_label} still takes {flag} but marks it deprecated",
                    fix="drop it, or move to its replacement in vLLM's --help",
                    cite=versions[0].cite,
                )
            return self._finding(occ, FindingKind.OK, Verdict.PASS, f"vLLM {self.target.vllm_label} flag")
        keyed = self._json_key(occ, flag, versions)
        if keyed is not None:
            return keyed

        known = [v for v in self.table.vllm_versions() if flag_in(flag, [v])]
        label = self.target.vllm_label
        elsewhere = self._other_vllm_only(
            occ,
            known,
            f"vLLM {label} has no {flag} (last in vLLM {{version}}); its argument parser refuses the command",
            f"vLLM {label} has no {flag} yet (first in vLLM {{version}})",
        )
        if elsewhere is not None:
            return elsewhere
        pool = set().union(*(v.flags for v in versions))
        expands = sorted(f for f in pool if f.startswith(flag) and flag.startswith("--"))
        if len(expands) == 1:  # argparse (allow_abbrev) takes a unique prefix as the whole flag
            return self._finding(
                occ,
                FindingKind.MISUSE,
                Verdict.WARNING,
                f"vLLM's parser expands the abbreviation {flag} to {expands[0]}; a later vLLM with another flag "
                "that starts the same way refuses it",
                fix=f"write {expands[0]}",
                migrate=(f"flag.{expands[0]}", occ.value),
            )
        if len(expands) > 1:
            return self._finding(
                occ,
                FindingKind.REJECTED,
                Verdict.ERROR,
                f"{flag} abbreviates several vLLM {self.target.vllm_label} flags ({', '.join(expands[:4])}): "
                "its argument parser refuses the ambiguous option",
                fix=f"write one of {', '.join(expands[:4])} in full",
            )
        close = self._did_you_mean(flag, pool)
        hint = f"; did you mean {close}?" if close else ""
        return self._finding(
            occ,
            FindingKind.REJECTED,
            Verdict.ERROR,
            f"vLLM {self.target.vllm_label} has no flag {flag}{hint}: its argument parser refuses the command",
            fix=f"use {close}" if close else "remove it",
            migrate=(f"flag.{close}", occ.value) if close else ("", None),
        )

    def _json_key(self, occ: Occurrence, flag: str, versions: list[VllmVersion]) -> Finding | None:
        """`--json-arg.key value`: from vLLM 0.9.0 its parser reads a key of a JSON-valued flag passed on its own
        as that flag with `{"key": value}` (the json_tip of vllm/engine/arg_utils.py@v0.9.0:186-190), so
        `--limit-mm-per-prompt.image 2` is the flag --limit-mm-per-prompt, not an unknown one."""

        base, dot, key = flag.partition(".")
        if not dot or not key or not flag_in(base, versions):
            return None
        if min(Version(v.version) for v in versions) < JSON_KEYS_FROM:
            return None
        return self._finding(
            occ,
            FindingKind.OK,
            Verdict.PASS,
            f"vLLM {self.target.vllm_label} reads {flag} as {base} with the JSON key {key}",
            cite=CITE_JSON_KEYS,
        )

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
                occ,
                FindingKind.OK,
                Verdict.PASS,
                f"vLLM compilation_config key; which vLLM {self.target.release} runs on is not known",
            )
        if any(key in v.compilation_keys for v in versions):
            tie = self._cuda_tie(occ, "option", key, None if isinstance(occ.value, (dict, list)) else str(occ.value))
            reason = f"vLLM {self.target.vllm_label} CompilationConfig field"
            if tie is not None:
                reason += f"; on Ascend: {tie.fix}"
            return self._finding(occ, FindingKind.OK, Verdict.PASS, reason)

        known = [v for v in self.table.vllm_versions() if key in v.compilation_keys]
        self._reported_unknown.add(top)
        gone = self._other_vllm_only(
            occ,
            known,
            f"vLLM {self.target.vllm_label}'s CompilationConfig has no {key} (last in vLLM {{version}}); "
            "start-up fails on an unknown field",
            setting=top,
        )
        if gone is not None:
            return gone
        pool = set().union(*(v.compilation_keys for v in versions))
        close = self._did_you_mean(key, pool)
        hint = f"; did you mean {close}?" if close else ""
        return self._finding(
            occ,
            FindingKind.UNKNOWN,
            Verdict.ERROR,
            f"vLLM {self.target.vllm_label}'s CompilationConfig has no field {key}{hint}; start-up fails on it",
            fix=f"use {close}" if close else "remove it",
            migrate=(f"compilation_config.{close}", occ.value) if close else ("", None),
            setting=top,
        )


def flag_in(flag: str, versions: Iterable[VllmVersion]) -> bool:
    """Whether one of the vLLM versions takes `flag` (its --no- form, -O for --optimization-level included)."""
    for version in versions:
        if flag in version.flags:
            return True
        if flag.startswith("--no-") and "--" + flag[5:] in version.flags:
            return True  # BooleanOptionalAction's negative form
        if flag == "-O" and "--optimization-level" in version.flags:
            return True
    return False
