"""Questions about `additional_config` keys: read at this release (with type, allowed values, status), moved
(renamed), dead or not read yet, unknown to a section that ignores or rejects unknown keys, or inside a section
vllm-ascend reads as a whole."""

from __future__ import annotations

from dataclasses import replace

from workbench.lint.command import Occurrence
from workbench.lint.findings import Finding, FindingKind
from workbench.lint.values import FALSY_TEXT, subtree
from workbench.results.verdict import Verdict
from workbench.truth.table import SettingKind, Span, same_value


class ConfigQuestions:
    """The additional_config half of `Judge` (mixed in; uses its shared pieces)."""

    def _additional(self, occ: Occurrence) -> Finding | None:
        path = occ.setting
        item = self.table.settings.get(path)
        span = self.table.span_at(item.spans, self.tag) if item else None
        if span is not None:
            return self._rules(occ) or self._additional_read(occ, span)
        rename = self.table.rename_from(path)
        if rename is not None and self.table.setting_at(rename.new, self.tag) is not None:
            return self._finding(
                occ,
                FindingKind.RENAMED,
                Verdict.ERROR,
                f"{path} is not read at {self.target.release}; the value now goes to {rename.new}",
                fix=f"move it to {rename.new}",
                cite=self.table.setting_at(rename.new, self.tag).cite,
                migrate=(rename.new, occ.value),
            )
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
                    occ,
                    FindingKind.OK,
                    Verdict.PASS,
                    f"inside {prefix}, which vllm-ascend reads as a whole (keys beneath it are not checked)",
                    cite=ancestor_span.cite,
                )
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
                    occ,
                    FindingKind.REJECTED,
                    Verdict.ERROR,
                    f"{section} rejects keys it does not know at {self.target.release}, and {path} is not one "
                    f"(last read at {item.spans[-1].last})",
                    fix="remove it",
                    cite=policy.cite,
                    migrate=("", None),
                )
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
            value = subtree(self.parsed, prefix)
            return replace(
                self._finding(
                    occ,
                    FindingKind.RENAMED,
                    Verdict.ERROR,
                    f"{prefix} now goes to {rename.new}",
                    fix=f"move it to {rename.new}",
                    migrate=(rename.new, value),
                    setting=prefix,
                ),
                value=value,
            )
        return replace(
            self._absent(occ, spans, prefix), setting=prefix, value=subtree(self.parsed, prefix), migrate=("", None)
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
        value = occ.value if path == occ.setting else subtree(self.parsed, path)
        if rule == "rejected":
            return replace(
                self._finding(
                    occ,
                    FindingKind.REJECTED,
                    Verdict.ERROR,
                    f"{section} rejects keys it does not know at {self.target.release}; {key} is not one{hint}",
                    fix=f"use {moved}" if moved else "remove it",
                    cite=policy.cite if policy else "",
                    migrate=(moved, value) if moved else ("", None),
                    setting=path,
                ),
                value=value,
            )
        if rule == "copied":
            return replace(self._copied_key(occ, path, policy, moved), value=value)
        silently = " and ignores it without a word" if rule == "ignored" else " and warns"
        return replace(
            self._finding(
                occ,
                FindingKind.UNKNOWN,
                Verdict.ERROR,
                f"vllm-ascend {self.target.release} reads no {path}{silently}{hint}",
                fix=f"use {moved}" if moved else "remove it (it does nothing)",
                cite=policy.cite if policy else "",
                migrate=(moved, value) if moved else ("", None),
                setting=path,
            ),
            value=value,
        )

    def _copied_key(self, occ: Occurrence, path: str, policy: Span | None, moved: str | None) -> Finding:
        """A section that copies every key onto its object (a setattr loop) and hands the object to a
        dataclass that picks its fields: a key vllm-ascend does not name may still be one of the fields the
        dataclass inherits (v0.11.0's ascend_scheduler_config takes any field of vLLM's SchedulerConfig)."""
        section, _, key = path.rpartition(".")
        return self._finding(
            occ,
            FindingKind.UNKNOWN,
            Verdict.WARNING,
            f"{section} copies every key onto its config object at {self.target.release}, and vllm-ascend names "
            f"no {key}: it takes effect only if the class that picks the fields (vLLM's own config) has one"
            + (f" (or did you mean {moved}?)" if moved else ""),
            fix=f"check that {key} is a field of the config {section} feeds, or remove it",
            cite=policy.cite if policy else "",
            setting=path,
        )

    def _additional_read(self, occ: Occurrence, span: Span) -> Finding:
        path = occ.setting
        status = span.status
        if status == "rejected":
            rename = self.table.rename_from(path)
            return self._finding(
                occ,
                FindingKind.REJECTED,
                Verdict.ERROR,
                f"start-up refuses {path} at {self.target.release} (the key was removed and is checked for)",
                fix=f"move it to {rename.new}" if rename else "remove it",
                cite=span.cite,
                migrate=(rename.new, occ.value) if rename else ("", None),
            )
        if status == "deprecated":
            successor = span.get("successor")
            return self._finding(
                occ,
                FindingKind.DEPRECATED,
                Verdict.WARNING,
                f"{path} still works at {self.target.release} but is deprecated"
                + (f" in favour of {successor}" if successor else ""),
                fix=f"move it to {successor}" if successor else "plan its removal",
                cite=span.cite,
                migrate=(successor, occ.value) if successor else None,
            )
        allowed = span.get("values")
        if allowed and not any(same_value(occ.value, v) for v in allowed):
            return self._finding(
                occ,
                FindingKind.REJECTED,
                Verdict.ERROR,
                f"start-up raises for {path} = {occ.value!r}: {self.target.release} accepts only {allowed}",
                fix=f"one of {allowed}",
                cite=span.cite,
            )
        kind = span.get("type")
        if kind == "bool" and isinstance(occ.value, str):
            falsy = occ.value.strip().lower() in FALSY_TEXT
            return self._finding(
                occ,
                FindingKind.MISUSE,
                Verdict.ERROR if falsy else Verdict.WARNING,
                f"{path} is a boolean and {occ.value!r} is text: vllm-ascend tests it for truth, so any non-empty "
                "text turns it on" + (" (this one reads as off but runs as on)" if falsy else ""),
                fix=f"write {str(not falsy).lower()} without quotes",
                cite=span.cite,
                migrate=(path, not falsy),
            )
        meaning = span.get("meaning")
        detail = f"; means: {meaning}" if meaning else ""
        return self._finding(
            occ,
            FindingKind.OK,
            Verdict.PASS,
            f"read by vllm-ascend (default {span.get('default')!r}){detail}",
            cite=span.cite,
        )
