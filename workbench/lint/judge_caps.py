"""Questions about values a release accepts: the quantization method, the KV-cache dtype, the KV connector,
the served model's architecture (`workbench.truth.capabilities`, the table scan, `lint --checkpoint` and
triage share)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from workbench.lint.command import Occurrence
from workbench.lint.findings import Finding, FindingKind
from workbench.results.verdict import Verdict
from workbench.truth import capabilities as caps

_REFUSED_FIX = {
    "--quantization": "serve an msmodelslim checkpoint with --quantization ascend (or a method the release lists), "
    "or leave --quantization out for a float checkpoint",
    "--kv-cache-dtype": "--kv-cache-dtype auto",
    "--kv-transfer-config": "name a connector the release registers, or give kv_connector_module_path",
}


class CapabilityQuestions:
    """The accepted-values half of `Judge` (mixed in; uses its shared pieces)."""

    def _capability(self, occ: Occurrence) -> Finding | None:
        """A finding when the release does not take this flag's value, else None."""
        flag, value = occ.name, occ.value
        if value is None or not isinstance(value, str):
            return None
        if flag in ("--quantization", "-q"):
            verdict = caps.quantization(self.table, self.tag, self.target.vllm, value)
        elif flag == "--kv-cache-dtype":
            verdict = caps.kv_cache_dtype(self.target.vllm, value.strip())
        elif flag == "--kv-transfer-config":
            connector = _connector(value)
            if connector is None:
                return None
            verdict = caps.kv_connector(self.table, self.tag, self.target.vllm, connector)
        else:
            return None
        if verdict.accepted is not False:
            return None
        return self._finding(
            occ,
            FindingKind.REJECTED,
            Verdict.ERROR,
            verdict.reason,
            fix=_REFUSED_FIX.get(flag, _REFUSED_FIX["--quantization"]),
            cite=verdict.cite,
            # the migrated copy leaves a refused method or dtype out (the release's default); a connector
            # the release does not register has no default to fall back to
            migrate=("", None) if flag != "--kv-transfer-config" else None,
        )

    def _model_findings(self) -> list[Finding]:
        """The served model's architecture, when config.json or --model-type names it, and the platform's
        refusals of a model type whatever the settings (the default graph mode for some architectures)."""
        found = self._model_rules()
        for arch in self.model.architectures:
            verdict = caps.architecture(self.table, self.tag, self.target.vllm, arch)
            if verdict.accepted is False:
                occ = Occurrence("model.architecture", arch, 0, "model")
                found.append(
                    self._finding(
                        occ,
                        FindingKind.REJECTED,
                        Verdict.ERROR,
                        f"{verdict.reason} (the model: {self.model.basis})",
                        fix="serve it with a release that supports the architecture",
                        cite=verdict.cite,
                    )
                )
        return found

    def _model_rules(self) -> list[Finding]:
        """Rules on `model.type`: checked once per command, on the model the lint identified."""
        if not self.model.known or self.parsed.launcher is None:
            return []
        line = self.parsed.launcher.words[0].line
        occ = Occurrence("model.type", self.model.describe(), line, "model")
        ruled = self._rules(occ)
        if ruled is None:
            return []
        return [replace(ruled, reason=f"{ruled.reason} (the model: {self.model.basis})")]


def _connector(value: str) -> str | None:
    """The connector a --kv-transfer-config names, unless it loads one from its own module path."""
    try:
        config: Any = json.loads(value)
    except json.JSONDecodeError:
        return None
    if not isinstance(config, dict) or config.get("kv_connector_module_path"):
        return None
    name = config.get("kv_connector")
    return str(name) if name else None
