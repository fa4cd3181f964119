"""Questions about environment variables: who reads a name at this release (vllm-ascend, vLLM, another
component or nobody), under which status (read, fallback, deprecated, build-time only), and whether its value
survives the parse (a 0/1 variable given `true`)."""

from __future__ import annotations

from collections.abc import Iterable

from workbench.lint.command import Occurrence
from workbench.lint.findings import Finding, FindingKind
from workbench.lint.values import INT_TYPES, as_int, env_value_as_json, is_int
from workbench.results.verdict import Verdict
from workbench.truth.table import SettingKind, Span


class EnvQuestions:
    """The environment-variable half of `Judge` (mixed in; uses its shared pieces)."""

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
                occ,
                FindingKind.FOREIGN,
                Verdict.PASS,
                f"{owner.owner}'s variable ({owner.source}){also}",
                cite=span.cite if span is not None else "",
            )
        if item is not None:
            span = self.table.span_at(item.spans, self.tag)
            if span is not None and span.get("where") == "vllm_envs":
                return ruled or self._finding(
                    occ,
                    FindingKind.OK,
                    Verdict.PASS,
                    "vLLM's variable, which vllm-ascend reads itself at this release",
                    cite=span.cite,
                )
            if span is None:
                rename = self.table.rename_from(occ.setting)
                if rename is not None and self.table.setting_at(rename.new, self.tag) is not None:
                    value = env_value_as_json(occ.value, str(item.spans[-1].get("type")))
                    return self._finding(
                        occ,
                        FindingKind.RENAMED,
                        Verdict.ERROR,
                        f"{name} is not read at {self.target.release}; {rename.new} takes its place"
                        + (f" ({rename.note})" if rename.note else ""),
                        fix=f"set {rename.new} = {value!r}",
                        cite=self.table.setting_at(rename.new, self.tag).cite,
                        migrate=(rename.new, value),
                    )
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
                        occ,
                        FindingKind.FOREIGN,
                        Verdict.PASS,
                        f"{owner.owner}'s variable; vllm-ascend also reads it",
                        cite=span.cite,
                    )
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
                occ,
                FindingKind.UNKNOWN,
                Verdict.ERROR,
                f"nothing on the stack reads {name}; vllm-ascend {self.target.release} reads {close}",
                fix=f"use {close}",
                migrate=(f"env.{close}", occ.value),
            )
        return self._finding(
            occ,
            FindingKind.UNKNOWN,
            Verdict.WARNING,
            f"neither vllm-ascend {self.target.release}, vLLM {self.target.vllm_label} nor a component the "
            "table knows (CANN, HCCL, torch_npu, ...) reads {name}; your own scripts may",
            fix="keep it only if your own code reads it",
        )

    def _env_in_table(self, occ: Occurrence, build_time: bool, span: Span) -> Finding:
        name = occ.name
        status = span.status
        if build_time:
            return self._finding(
                occ,
                FindingKind.MISUSE,
                Verdict.WARNING,
                f"{name} is read only when vllm-ascend is built (setup.py); a serving command changes nothing",
                fix="set it when you build or install vllm-ascend, not when you serve",
                cite=span.cite,
                migrate=("", None),
            )
        expected = INT_TYPES.get(str(span.get("type")))
        if expected and occ.value is not None and not is_int(occ.value):
            return self._finding(
                occ,
                FindingKind.REJECTED,
                Verdict.ERROR,
                f"{name} is parsed with int(): {occ.value!r} raises ValueError at start-up; it takes {expected}",
                fix=f"{name}={as_int(occ.value)}" if as_int(occ.value) is not None else f"set {expected}",
                cite=span.cite,
                migrate=(occ.setting, str(as_int(occ.value))) if as_int(occ.value) is not None else None,
            )
        if status == "fallback":
            successor = str(span.get("successor"))
            also = self._present(successor)
            value = env_value_as_json(occ.value, str(span.get("type")))
            reason = f"{name} is read at {self.target.release} only as the fallback of {successor}" + (
                "; that key is set too, so this variable is ignored" if also else ""
            )
            return self._finding(
                occ,
                FindingKind.DEPRECATED,
                Verdict.WARNING,
                reason + "; the variable is slated for removal",
                fix=f"set {successor} = {value!r} in --additional-config",
                cite=span.cite,
                migrate=(successor, value),
            )
        if status == "deprecated":
            return self._finding(
                occ,
                FindingKind.DEPRECATED,
                Verdict.WARNING,
                f"{name} is marked deprecated at {self.target.release}",
                fix="plan its removal",
                cite=span.cite,
            )
        meaning = span.get("meaning")
        default = span.get("default")
        detail = f"; means: {meaning}" if meaning else ""
        return self._finding(
            occ,
            FindingKind.OK,
            Verdict.PASS,
            f"read by vllm-ascend (default {default!r}){detail}",
            cite=span.cite,
        )

    def _vllm_env(self, occ: Occurrence, also: str = "") -> Finding:
        name = occ.name
        versions = self.target.vllm
        tie = self._cuda_tie(occ, "env", name)
        if versions and any(name in v.envs for v in versions):
            if tie is not None:
                return tie
            extra = f"; vllm-ascend reads it too ({also})" if also else ""
            return self._finding(
                occ,
                FindingKind.FOREIGN,
                Verdict.PASS,
                f"vLLM's variable (read by vLLM {self.target.vllm_label}){extra}",
                cite=versions[0].cite,
            )
        if not versions:
            return self._finding(
                occ,
                FindingKind.FOREIGN,
                Verdict.PASS,
                f"vLLM's variable; which vLLM {self.target.release} runs on is not known, so it is not checked",
            )
        known = [v for v in self.table.vllm_versions() if name in v.envs]
        from packaging.version import Version

        now = max(Version(v.version) for v in versions)
        older = [v for v in known if Version(v.version) < now]
        if older:
            return self._finding(
                occ,
                FindingKind.DEAD,
                Verdict.ERROR,
                f"vLLM {self.target.vllm_label} no longer reads {name} (last read by vLLM {older[-1].version})",
                fix="remove it",
                cite=older[-1].cite,
                migrate=("", None),
            )
        if known:
            return self._finding(
                occ,
                FindingKind.UNKNOWN,
                Verdict.ERROR,
                f"vLLM {self.target.vllm_label} does not read {name} yet (first read by vLLM {known[0].version})",
                fix="remove it",
                migrate=("", None),
            )
        if tie is not None:
            return tie
        return self._unknown_env(occ, f"vLLM {self.target.vllm_label}", set().union(*(v.envs for v in versions)))

    def _unknown_env(self, occ: Occurrence, reader: str, known: Iterable[str]) -> Finding:
        """A variable `reader` does not read: an error, with the closest name it does read as the fix."""
        name = occ.name
        close = self._did_you_mean(name, known)
        hint = f"; did you mean {close}?" if close else ""
        return self._finding(
            occ,
            FindingKind.UNKNOWN,
            Verdict.ERROR,
            f"{reader} reads no variable {name}{hint}",
            fix=f"use {close}" if close else "remove it (it does nothing)",
            migrate=(f"env.{close}", occ.value) if close else ("", None),
        )

    def _cuda_tie(self, occ: Occurrence, kind: str, name: str, value: str | None = None) -> Finding | None:
        from workbench.scan.api import cuda_tie

        found = cuda_tie(kind, name, value)
        if found is None:
            return None
        rule_id, row = found
        return self._finding(
            occ,
            FindingKind.FOREIGN,
            Verdict.WARNING,
            f"a CUDA setting ({row.detects}; scan rule {rule_id}): it does nothing on Ascend",
            fix=row.counterpart,
            cite=row.cite[0] if row.cite else "",
        )
