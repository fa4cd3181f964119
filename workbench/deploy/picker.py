"""Which vllm-ascend release a service can move to, starting from what it runs (docs/METHOD.md §2).

The service's vLLM version (image tag, the `ARG` behind it, `vllm==` pins), its models and the features
its engine flags turn on are read from the deployment (`workbench.deploy.facts`). Each release of the
matrix (`recipes/matrices/vllm-ascend.yaml`, paired with its vLLM in `workbench/truth/data/vllm_envs.json`)
is then judged the way `lint` judges a command: a release holds the service when every engine setting
lints without an error there. The pick is the release whose vLLM is nearest at or above the service's
(the smallest move), among those that hold it; each reason and each change carries its citation.

A vLLM version given where a vllm-ascend release is expected (`--release 0.27.1`) is refused, never read
as `main`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from workbench.deploy import facts as facts_mod
from workbench.deploy.lintview import parsed_for
from workbench.deploy.model import Container, ReadResult
from workbench.errors import WorkbenchError
from workbench.truth.table import MAIN, config_table

MATRIX_CITE = "recipes/matrices/vllm-ascend.yaml (vllm-ascend docs/source/community/versioning_policy.md)"


@dataclass(frozen=True)
class Reason:
    text: str
    cite: str = ""


@dataclass(frozen=True)
class Candidate:
    release: str
    vllm: str
    errors: int


@dataclass(frozen=True)
class Pick:
    release: str  # 'v0.25.1rc1'
    vllm: str  # the vLLM the matrix pairs with it
    service_vllm: str | None
    holding: tuple[str, ...]  # the releases judged (every final one, the same vLLM's, the newest) that hold the service
    reasons: tuple[Reason, ...]
    changes: tuple[Reason, ...]  # what must change to move (a vLLM downgrade, a feature with no Ascend path)
    candidates: tuple[Candidate, ...]

    def to_dict(self) -> dict:
        return {
            "release": self.release,
            "vllm": self.vllm,
            "service_vllm": self.service_vllm,
            "holding": list(self.holding),
            "reasons": [r.__dict__ for r in self.reasons],
            "changes": [c.__dict__ for c in self.changes],
            "candidates": [c.__dict__ for c in self.candidates],
        }


def releases() -> list[tuple[str, str]]:
    """(tag, paired vLLM) of every release the matrix pairs, oldest first."""
    table = config_table()
    paired = [(f"v{r}", vs[-1]) for r, vs in table.pairs.items() if vs and f"v{r}" in table.tags]
    return sorted(paired, key=lambda rv: Version(rv[0].lstrip("v")))


def check_release(text: str) -> str:
    """A vllm-ascend tag as given (`v0.25.1rc1`, `0.13.0`, `main`), or one WorkbenchError: a version the
    matrix does not list is refused, and a vLLM version is named as one."""
    if text.strip().lower() == MAIN:
        return MAIN
    tags = {t.lstrip("v"): t for t in config_table().tags if t != MAIN}
    given = text.strip().lstrip("vV")
    if given in tags:
        return tags[given]
    known = ", ".join(t for t, _ in releases()[-4:])
    vllm = {v for v in config_table().vllm} | {v for vs in config_table().pairs.values() for v in vs}
    pairs = [t for t, v in releases() if v == given]
    if given in vllm or facts_mod.as_version(given) is not None:
        hint = f" (vllm-ascend {pairs[-1]} pairs with vLLM {given})" if pairs else ""
        raise WorkbenchError(
            f"--release {text}: that is not a vllm-ascend release the matrix lists; {given} reads as a vLLM "
            f"version{hint}. Give a vllm-ascend release (newest: {known}) or main"
        )
    raise WorkbenchError(f"--release {text}: not a vllm-ascend release (e.g. {known} or main)")


# A setting lint calls an error only because nothing reads it (a dead or unknown environment variable) is
# removed by the port and does not stop a release from holding the service; a refused value, a known
# breakage, a missing companion setting or a flag the paired vLLM does not parse does.
_REMOVABLE = {"dead", "unknown"}


def _signature(container: Container) -> tuple:
    return tuple((s.key, s.value) for s in (*container.flags, *container.env))


class _Judge:
    """Blocking errors per release, computed once per distinct engine container and only for the releases
    a choice needs (every final release, the ones pairing with the service's vLLM, the newest)."""

    def __init__(self, containers: tuple[Container, ...], consumed: frozenset[str]) -> None:
        distinct = {_signature(c): c for c in containers}
        self.containers = tuple(distinct.values())
        self.consumed = consumed
        self.cache: dict[str, int] = {}

    def errors(self, tag: str) -> int:
        from workbench.lint.api import lint_parsed

        if tag not in self.cache:
            count = 0
            for container in self.containers:
                for finding in lint_parsed(parsed_for(container, self.consumed), release=tag).errors:
                    if not (finding.setting.startswith("env.") and finding.finding.value in _REMOVABLE):
                        count += 1
                count += len(gaps_at(container, tag))
            self.cache[tag] = count
        return self.cache[tag]


def gaps_at(container: Container, tag: str) -> list[tuple[Any, Any]]:
    """(gap, setting) for each feature the container turns on that the release does not serve."""
    from workbench.deploy.policy import feature_gaps

    tags = config_table().tags
    found = []
    for gap in feature_gaps().rows:
        setting = container.flag(gap.flag)
        if setting is not None and gap.applies(setting.value, tag, tags):
            found.append((gap, setting))
    return found


def pick_release(result: ReadResult, release: str | None = None) -> Pick:
    """The release for the service in `result` (or the one given, checked the same way)."""
    containers = result.containers
    if not containers:
        raise WorkbenchError(
            "no engine container was read, so there is nothing to pick a release for; see the files not read"
        )
    judge = _Judge(containers, frozenset(result.convention.flags))
    versions = facts_mod.vllm_versions(result)
    service = max(versions, key=lambda v: v.version) if versions else None
    table = releases()
    needed = [(t, v) for t, v in table if _is_final(t) or (service is not None and Version(v) == service.version)]
    needed.append(table[-1])
    candidates = tuple(Candidate(t, v, judge.errors(t)) for t, v in table if (t, v) in needed)
    holding = tuple(c.release for c in candidates if c.errors == 0)
    if release is not None:
        chosen = check_release(release)
        paired = dict(table).get(chosen, "main")
        reasons = [Reason(f"--release {release}: judged at {chosen} as asked")]
    else:
        chosen, paired, reasons = _choose(candidates, service, result)
    reasons.append(_models_reason(result))
    reasons.extend(_gap_reasons(result, candidates))
    changes = _changes(result, service, chosen, paired)
    return Pick(
        chosen, paired, str(service.version) if service else None, holding, tuple(reasons), tuple(changes), candidates
    )


def _is_final(tag: str) -> bool:
    return not Version(tag.lstrip("v")).is_prerelease


def _choose(candidates: tuple[Candidate, ...], service, result: ReadResult) -> tuple[str, str, list[Reason]]:
    """Same vLLM when a release pairs with it exactly; else the nearest final release above it (the
    newest final one when the service's vLLM is newer than all, or not stated); release candidates only
    when no final release holds the service."""
    holding = [c for c in candidates if c.errors == 0]
    reasons = [_version_reason(service, result)]
    exact = [c for c in holding if service is not None and Version(c.vllm) == service.version]
    above = [c for c in holding if service is not None and Version(c.vllm) > service.version]
    if exact:
        chosen = ([c for c in exact if _is_final(c.release)] or exact)[-1]
        why = f"{chosen.release} pairs with the same vLLM ({chosen.vllm})"
    elif above and any(_is_final(c.release) for c in above):
        chosen = next(c for c in above if _is_final(c.release))
        why = f"no release pairs with vLLM {service.version} itself; {chosen.release} is the nearest final release above it (vLLM {chosen.vllm})"
    elif holding:
        finals = [c for c in holding if _is_final(c.release)]
        chosen = (finals or holding)[-1]
        kind = "final release" if finals else "release (no final one holds it)"
        why = f"{chosen.release} is the newest {kind} that holds every engine setting (vLLM {chosen.vllm})"
        newer = [c for c in holding if Version(c.vllm) > Version(chosen.vllm)]
        if newer:
            why += f"; {newer[-1].release} (vLLM {newer[-1].vllm}) also holds it but is a release candidate"
    else:
        # the fewest refusals; on a tie a final release before a release candidate, then the newest
        chosen = min(reversed(candidates), key=lambda c: (c.errors, not _is_final(c.release)))
        why = f"no release judged holds every engine setting; {chosen.release} (vLLM {chosen.vllm}) refuses the fewest"
    if chosen.errors:
        why += f"; {chosen.errors} setting(s) must change first (below)"
    reasons.append(Reason(why + "; releases move with their vLLM in lock-step (docs/METHOD.md §2)", MATRIX_CITE))
    return chosen.release, chosen.vllm, reasons


def _gap_reasons(result: ReadResult, candidates: tuple[Candidate, ...]) -> list[Reason]:
    """Each feature gap that ruled releases out, with the releases it ruled out and its citation."""
    found: dict[str, tuple[Any, Any, list[str]]] = {}
    for container in result.containers:
        for candidate in candidates:
            for gap, setting in gaps_at(container, candidate.release):
                found.setdefault(gap.id, (gap, setting, []))[2].append(candidate.release)
    return [
        Reason(
            f"{gap.flag} {setting.value} ({setting.origin}) rules out {', '.join(dict.fromkeys(tags))}: {gap.why}",
            gap.cite[0],
        )
        for gap, setting, tags in found.values()
    ]


def _models_reason(result: ReadResult) -> Reason:
    """The models, by architecture where their config.json is readable here (else by name: lint's model
    rules read the name), as the release is judged for them."""
    seen = []
    for container in result.containers:
        for model in facts_mod.models(container):
            what = (
                f"architecture {model.architecture} (config.json)"
                if model.architecture
                else "by name (config.json not readable here)"
            )
            seen.append(f"{model.name}: {what}")
    return Reason(
        "models judged: " + ("; ".join(dict.fromkeys(seen)) or "none set (give one with --env or in the deployment)")
    )


def _version_reason(service, result: ReadResult) -> Reason:
    if service is not None:
        return Reason(f"the service runs vLLM {service.version} ({service.how}, {service.origin})")
    images = sorted({c.image.value for c in result.containers if c.image and c.image.value})
    looked = f" (images: {', '.join(images)})" if images else ""
    return Reason(f"no vLLM version is stated{looked}: no vllm/vllm-openai tag that is a version, no vllm== pin")


def _changes(result: ReadResult, service, tag: str, paired: str) -> list[Reason]:
    from workbench.lint.api import lint_parsed
    from workbench.scan.api import cuda_tie
    from workbench.scan.mapping import load_mapping

    changes: list[Reason] = []
    if service is not None and paired != "main" and Version(paired) != service.version:
        verb = "a downgrade" if Version(paired) < service.version else "an upgrade"
        changes.append(Reason(f"vLLM {service.version} -> {paired}: {verb} ({service.origin})", MATRIX_CITE))
    consumed = frozenset(result.convention.flags)
    for container in result.containers:
        for gap, setting in gaps_at(container, tag):
            changes.append(
                Reason(f"{container.name}: {gap.flag} {setting.value} ({setting.origin}): {gap.why}", gap.cite[0])
            )
        for finding in lint_parsed(parsed_for(container, consumed), release=tag).errors:
            changes.append(
                Reason(
                    f"{container.name}: {finding.setting}={finding.value}: {finding.reason}; fix: {finding.fix}",
                    finding.cite,
                )
            )
        for label, value, origin in facts_mod.features(container):
            if label == "KV connector" and "lmcache" in value.lower():
                row = load_mapping().rules["kv_cache.cuda_image"]
                changes.append(
                    Reason(
                        f"{container.name}: KV connector {value} ({origin}) is LMCache's, built for CUDA: {row.counterpart}",
                        row.cite[0],
                    )
                )
                continue
            tie = cuda_tie("option", _flag_key(label), value)
            if tie is not None and tie[1].severity.value in ("blocks", "change"):
                what = "has no Ascend path" if tie[1].severity.value == "blocks" else "needs a change on Ascend"
                changes.append(
                    Reason(f"{container.name}: {label} {value} ({origin}) {what}: {tie[1].counterpart}", tie[1].cite[0])
                )
    return changes


def _flag_key(label: str) -> str:
    return next((flag for flag, name in facts_mod.FEATURE_FLAGS.items() if name == label), label)
