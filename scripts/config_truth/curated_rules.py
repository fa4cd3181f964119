"""The curated part of the config-truth table (`curated.yaml`): what the readers cannot see (a platform
rule, a known breakage, a rename across sections, a change of meaning), each entry anchored in the source:
an entry's spans are the tags where its anchor matches, never typed in. Also the span builder the whole
table uses."""

from __future__ import annotations

import ast
import difflib
import re
from typing import Any

from mirror import Mirror


def anchor_hits(mirror: Mirror, tag: str, anchor: dict[str, Any]) -> tuple[str, int] | None:
    """(path, line) of the anchor at `tag`: `pattern` in `path` (a file or folder), and every `then`
    pattern within `within` lines after it (default 12)."""
    hits = mirror.grep(tag, anchor["pattern"], anchor["path"])
    follow = anchor.get("then") or []
    if isinstance(follow, str):
        follow = [follow]
    within = int(anchor.get("within", 12))
    for path, line, _ in hits:
        if not follow:
            return path, line
        text = (mirror.show(tag, path) or "").splitlines()
        window = "\n".join(text[line : line + within])
        if all(re.search(p, window) for p in follow):
            return path, line
    return None


def curated_spans(mirror: Mirror, tags: list[str], entry: dict[str, Any], facts: dict[str, Any] | None = None):
    anchors = entry.get("anchor")
    anchors = anchors if isinstance(anchors, list) else [anchors]
    extract = entry.get("extract")
    per_tag = {}
    for tag in tags:
        hit = None
        for anchor in anchors:
            hit = anchor_hits(mirror, tag, anchor)
            if hit is None:
                break
        if hit is not None:
            found = {**(facts or {}), "cite": f"{tag}:{hit[0]}:{hit[1]}"}
            if extract:
                match = re.search(extract["pattern"], mirror.show(tag, extract["path"]) or "")
                if match is None:
                    raise SystemExit(f"curated {entry.get('id')}: extract pattern finds nothing at {tag}")
                found[extract["key"]] = ast.literal_eval(match.group(1))
            per_tag[tag] = found
    return per_tag


def to_spans(tags: list[str], per_tag: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    spans: list[dict[str, Any]] = []
    previous_tag = None
    for tag in tags:
        facts = per_tag.get(tag)
        if facts is None:
            previous_tag = None
            continue
        body = {k: v for k, v in facts.items() if k not in {"cite", "kind", "build_time"}}
        if spans and previous_tag is not None and spans[-1]["_body"] == body:
            spans[-1]["last"] = tag
        else:
            spans.append({"first": tag, "last": tag, "cite": facts["cite"], **body, "_body": body})
        previous_tag = tag
    for span in spans:
        del span["_body"]
    return spans


def removal(mirror: Mirror, tags: list[str], spans: list[dict[str, Any]], needle: str, path: str) -> None:
    """For each span followed by a tag without the setting, the commit between the two that removed it."""
    for span in spans:
        i = tags.index(span["last"])
        if i + 1 >= len(tags):
            continue
        after = tags[i + 1]
        if any(s["first"] == after for s in spans):
            continue
        try:
            out = mirror.git("log", "--format=%h %s", f"-S{needle}", f"{span['last']}..{after}", "--", path)
        except Exception:  # noqa: BLE001 - history across release branches may be unrelated
            out = ""
        first = out.splitlines()[-1] if out.strip() else ""
        if first:
            sha, _, subject = first.partition(" ")
            span["removed_after"] = {"tag": after, "commit": sha, "subject": subject[:120]}
        else:
            span["removed_after"] = {"tag": after}


def curated_rules(mirror: Mirror, tags: list[str], curated: dict[str, Any]) -> list[dict[str, Any]]:
    """The platform's rules (anchored at every tag) and the known breakages (listed per release)."""
    rules = []
    for entry in curated.get("rules", []):
        per_tag = curated_spans(mirror, tags, entry, {"models": entry["models"]} if entry.get("models") else None)
        requires = entry.get("requires")
        if isinstance(requires, dict):
            requires = [requires]
        if not per_tag:
            raise SystemExit(f"curated rule {entry['id']!r}: its anchor matches no tag; fix curated.yaml")
        rules.append(
            {
                "id": entry["id"],
                "setting": entry["setting"],
                "when": entry.get("when") or {"set": True},
                "action": entry["action"],
                "to": entry.get("to", entry.get("fix")),
                "requires": requires,
                "unless": entry.get("unless") or [],
                "multimodal": entry.get("multimodal"),
                # a model list limits where a rule applies, except for model_list rules, whose list is the rule
                "model": entry.get("models") if entry["action"] != "model_list" and entry.get("models") else [],
                "reason": entry["reason"],
                "evidence": entry.get("evidence", []),
                "spans": to_spans(tags, per_tag),
            }
        )
    for entry in curated.get("known_broken", []):
        if entry["releases"] == "all":
            entry = {**entry, "releases": list(tags)}
        unknown = [t for t in entry["releases"] if t not in tags]
        if unknown:
            raise SystemExit(f"curated known_broken {entry['id']!r}: {unknown} are not matrix tags")
        evidence = ", ".join(entry.get("evidence", []))
        per_tag = {t: {"cite": f"reports: {evidence}"} for t in entry["releases"]}
        rules.append(
            {
                "id": entry["id"],
                "setting": entry["setting"],
                "when": entry.get("when") or {"set": True},
                "action": "broken",
                "severity": entry.get("severity", "error"),
                "to": entry.get("fix"),
                "requires": [],
                "unless": entry.get("unless") or [],
                "also": entry.get("also") or [],
                "model": entry.get("model") or [],
                "reason": entry["reason"],
                "evidence": entry.get("evidence", []),
                "spans": to_spans(tags, per_tag),
            }
        )
    return rules


def curated_renames(curated: dict[str, Any], known: set[str]) -> list[dict[str, Any]]:
    """Keys that moved; both sides must be settings some tag reads."""
    renames = []
    for entry in curated.get("renames", []):
        for side in ("from", "to"):
            if entry[side] not in known:
                close = difflib.get_close_matches(entry[side], known, 3)
                raise SystemExit(
                    f"curated rename {entry['from']} -> {entry['to']}: {entry[side]!r} is never read; {close}"
                )
        renames.append({"from": entry["from"], "to": entry["to"], "note": entry.get("note", "")})
    return renames
