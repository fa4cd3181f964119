"""Questions about environment variables: who reads a name at this release (vllm-ascend, vLLM, another
component or nobody), under which status (read, fallback, deprecated, build-time only), and whether its value
survives the parse (a 0/1 variable given `true`)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from workbench.lint.command import VALID_ENV_NAME, Occurrence
from workbench.lint.findings import Finding, FindingKind
from workbench.lint.values import INT_TYPES, as_int, env_value_as_json, is_int
from workbench.results.verdict import Verdict
from workbench.truth.table import SettingKind, Span


class EnvQuestions:
    """The environment-variable half of `Judge` (mixed in; uses its shared pieces)."""

    def _env(self, occ: Occurrence) -> Finding:
        """The first question with an answer: can it be a variable at all, was it renamed, does a platform
        rule speak to its value, and then who reads it."""
        return self._env_name(occ) or self._env_renamed(occ) or self._rules(occ) or self._env_reader(occ)

    def _env_name(self, occ: Occurrence) -> Finding | None:
        """A name with a hyphen or a dot: bash refuses `export` of it ('not a valid identifier'), a prefix
        assignment of it runs as a command, and no program reads it under the name it meant."""
        if VALID_ENV_NAME.match(occ.name):
            return None
        meant = re.sub(r"[^A-Za-z0-9_]", "_", occ.name)
        return self._finding(
            occ,
            FindingKind.REJECTED,
            Verdict.ERROR,
            f"{occ.name!r} cannot be an environment variable name (letters, digits and underscores only): "
            "the shell refuses it and nothing reads it",
            fix=f"{meant}={occ.value}" if occ.value is not None else f"spell it {meant}",
            cite="POSIX.1-2017 Base Definitions §8.1 (environment variable names); bash: 'not a valid identifier'",
            migrate=(f"env.{meant}", occ.value),
        )

    def _env_renamed(self, occ: Occurrence) -> Finding | None:
        item = self.table.settings.get(occ.setting)
        if item is None or self.table.span_at(item.spans, self.tag) is not None:
            return None
        rename = self.table.rename_from(occ.setting)
        if rename is None or self.table.setting_at(rename.new, self.tag) is None:
            return None
        value = env_value_as_json(occ.value, str(item.spans[-1].get("type")))
        return self._finding(
            occ,
            FindingKind.RENAMED,
            Verdict.ERROR,
            f"{occ.name} is not read at {self.target.release}; {rename.new} takes its place"
            + (f" ({rename.note})" if rename.note else ""),
            fix=f"set {rename.new} = {value!r}",
            cite=self.table.setting_at(rename.new, self.tag).cite,
            migrate=(rename.new, value),
        )

    def _env_reader(self, occ: Occurrence) -> Finding:
        """Who reads the name at this release: another component, vllm-ascend (envs.py or directly), vLLM, the
        script itself, or nobody."""
        name = occ.name
        item = self.table.settings.get(occ.setting)
        span = self.table.span_at(item.spans, self.tag) if item is not None else None
        owner = self.table.owner_of(name)
        if owner is not None and owner.owner not in ("vLLM", "ascend-workbench"):
            also = "; vllm-ascend reads it too" if span is not None else ""
            return (
                self._cuda_tie(occ, "env", name)
                or self._npu_twin(occ)
                or self._finding(
                    occ,
                    FindingKind.FOREIGN,
                    Verdict.PASS,
                    f"{owner.owner}'s variable ({owner.source}){also}",
                    cite=span.cite if span is not None else "",
                )
            )
        is_vllm = name.startswith("VLLM_") and not name.startswith("VLLM_ASCEND_")
        if span is not None:
            if span.get("where") == "vllm_envs":
                return self._finding(
                    occ, FindingKind.OK, Verdict.PASS, "vLLM's variable, which vllm-ascend reads itself", cite=span.cite
                )
            if span.get("where") == "direct" and span.status != "alias":
                if is_vllm:
                    return self._vllm_env(occ, also=span.cite)
                return self._finding(occ, FindingKind.OK, Verdict.PASS, "read by vllm-ascend", cite=span.cite)
            return self._env_in_table(occ, item.build_time, span)
        if item is not None and not is_vllm:
            return self._absent(occ, item.spans, f"vllm-ascend variable {name}")
        if is_vllm:
            return self._vllm_env(occ)
        if name.startswith("VLLM_ASCEND_"):
            return self._own_env(occ) or self._unknown_env(
                occ, f"vllm-ascend {self.target.release}", self._ascend_env_names()
            )
        return self._other_env(occ)

    def _other_env(self, occ: Occurrence) -> Finding:
        """A name outside vllm-ascend's and vLLM's prefixes: a CUDA setting, another stack's spelling of a
        torch_npu variable, vLLM reading it directly, a known component's, the script's own, or nobody's."""
        name = occ.name
        found = self._cuda_tie(occ, "env", name) or self._npu_twin(occ) or self._vllm_direct(occ)
        if found is not None:
            return found
        owner = self.table.owner_of(name)
        if owner is not None:
            return self._finding(occ, FindingKind.FOREIGN, Verdict.PASS, f"{owner.owner}'s variable ({owner.source})")
        own = self._own_env(occ)
        if own is not None:
            return own
        # a name of no known family is a typo of vllm-ascend's only when nearly the same (ASCEBD_ -> ASCEND_);
        # a loose match (LLM_ENDPOINT_PORT ~ VLLM_DP_MONITOR_PORT) is another program's variable
        close = self._did_you_mean(name, self._ascend_env_names(), cutoff=0.85)
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
            f"table knows (CANN, HCCL, torch_npu, ...) reads {name}; your own scripts may",
            fix="keep it only if your own code reads it",
        )

    def _ascend_env_names(self) -> list[str]:
        return [s.split(".", 1)[1] for s in self.table.names_at(SettingKind.ENV, self.tag)]

    def _npu_twin(self, occ: Occurrence) -> Finding | None:
        """PyTorch's spelling of a variable torch_npu reads under its own name (PYTORCH_ALLOC_CONF ->
        PYTORCH_NPU_ALLOC_CONF): the NPU allocator never sees it."""
        twin = self.table.twin_of(occ.name)
        if twin is None:
            return None
        owner, npu_name = twin
        return self._finding(
            occ,
            FindingKind.FOREIGN,
            Verdict.WARNING,
            f"{owner.owner} reads {npu_name}, not {occ.name}: on the NPU this setting does nothing",
            fix=f"{npu_name}={occ.value}" if occ.value is not None else f"set {npu_name}",
            cite=owner.twins_source,
            migrate=(f"env.{npu_name}", occ.value),
        )

    def _vllm_direct(self, occ: Occurrence) -> Finding | None:
        """A variable vLLM reads with os.environ / os.getenv outside its envs.py (PROMETHEUS_MULTIPROC_DIR)."""
        versions = self.target.vllm or tuple(self.table.vllm_versions())
        where = next((v.env_reads[occ.name] for v in versions if occ.name in v.env_reads), None)
        if where is None:
            return None
        return self._finding(
            occ,
            FindingKind.FOREIGN,
            Verdict.PASS,
            f"read by vLLM directly ({where}), not through its envs.py",
            cite=where,
        )

    def _own_env(self, occ: Occurrence) -> Finding | None:
        """A variable the input itself reads (`$NAME` in a script, a getenv of it): the service's own, such
        as a pass-through of extra flags, whatever its prefix."""
        name = re.escape(occ.name)
        uses = rf"\$\{{?{name}\b|getenv\(\s*['\"]{name}['\"]|environ(?:\.get\(|\[)\s*['\"]{name}['\"]"
        if not re.search(uses, self.parsed.text):
            return None
        return self._finding(
            occ,
            FindingKind.FOREIGN,
            Verdict.PASS,
            f"the input reads {occ.name} itself (its own variable, not the stack's)",
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
        if status == "alias":
            successor = str(span.get("successor"))
            new_name = successor.split(".", 1)[1]
            return self._finding(
                occ,
                FindingKind.DEPRECATED,
                Verdict.WARNING,
                f"{name} is read at {self.target.release} only as the old name of {new_name}, kept for backward "
                "compatibility" + ("; that variable is set too" if self._present(successor) else ""),
                fix=f"{new_name}={occ.value}",
                cite=span.cite,
                migrate=(successor, occ.value),
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
        """A VLLM_* name: read by the vLLM that runs, read by another vLLM only (dead, or not yet), read by
        vLLM outside envs.py, the script's own, or by nobody."""
        name = occ.name
        versions = self.target.vllm
        tie = self._cuda_tie(occ, "env", name)
        if not versions:
            return self._finding(
                occ,
                FindingKind.FOREIGN,
                Verdict.PASS,
                f"vLLM's variable; which vLLM {self.target.release} runs on is not known, so it is not checked",
            )
        if any(name in v.envs for v in versions):
            extra = f"; vllm-ascend reads it too ({also})" if also else ""
            return tie or self._finding(
                occ,
                FindingKind.FOREIGN,
                Verdict.PASS,
                f"vLLM's variable (read by vLLM {self.target.vllm_label}){extra}",
                cite=versions[0].cite,
            )
        found = self._vllm_direct(occ) or self._vllm_lifetime(occ) or self._own_env(occ) or tie
        return found or self._unread_vllm_env(occ)

    def _vllm_lifetime(self, occ: Occurrence) -> Finding | None:
        """Another vLLM reads it: an older one (dead now) or a newer one (not yet)."""
        name = occ.name
        known = [v for v in self.table.vllm_versions() if name in v.envs]
        label = self.target.vllm_label
        return self._other_vllm_only(
            occ,
            known,
            f"vLLM {label} no longer reads {name} (last read by vLLM {{version}})",
            f"vLLM {label} does not read {name} yet (first read by vLLM {{version}})",
        )

    def _unread_vllm_env(self, occ: Occurrence) -> Finding:
        """No vLLM reads the name: a typo when it is close to one vLLM reads; otherwise possibly a service's
        own VLLM_-looking variable (a pass-through of extra flags), so a warning, not an order to remove it."""
        reader = f"vLLM {self.target.vllm_label}"
        known = set().union(*(v.envs for v in self.target.vllm))
        if self._did_you_mean(occ.name, known):
            return self._unknown_env(occ, reader, known)
        return self._finding(
            occ,
            FindingKind.UNKNOWN,
            Verdict.WARNING,
            f"{reader} reads no variable {occ.name}, nor does vllm-ascend {self.target.release}; "
            "if your service reads it itself (its own pass-through), keep it",
            fix="remove it unless your own code reads it",
        )

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
