"""`lint --fix OUT`: a migrated copy of the input (never the input itself) and the diff that shows it.

Each finding that knows its migration (`Finding.migrate`) becomes an edit: a dead or unknown setting is
removed, a renamed one moves its value to the new name (an environment variable that became an
`additional_config` key goes into `--additional-config`), a value the release cannot parse is written
the way it can. A script is edited in place word by word, so comments and every other line stay as
they are; JSON arguments are rewritten whole. A recipe is rewritten as YAML (its comments are lost,
which the output says).
"""

from __future__ import annotations

import copy
import difflib
import json
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from workbench.errors import WorkbenchError
from workbench.lint.command import ConfigArg, Occurrence, ParsedInput
from workbench.lint.findings import Finding


def _set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = data
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value


def _drop_path(data: dict[str, Any], dotted: str) -> None:
    parts = dotted.split(".")
    trail = [data]
    for part in parts[:-1]:
        nxt = trail[-1].get(part)
        if not isinstance(nxt, dict):
            return
        trail.append(nxt)
    trail[-1].pop(parts[-1], None)
    for node, part in zip(reversed(trail[:-1]), reversed(parts[:-1])):  # prune emptied sections
        if node.get(part) == {}:
            node.pop(part)


def _plan(findings: Iterable[Finding]) -> tuple[list[Finding], list[tuple[str, Any]]]:
    """(findings whose setting goes away, settings to add)."""
    remove, add = [], []
    for finding in findings:
        if finding.migrate is None:
            continue
        remove.append(finding)
        new, value = finding.migrate
        if new:
            add.append((new, value))
    return remove, add


# -- scripts --------------------------------------------------------------------------------------------


def _env_text(name: str, value: Any) -> str:
    return f"{name}={shlex.quote(str(value))}"


def fix_script(parsed: ParsedInput, findings: list[Finding]) -> str:
    text = parsed.text
    remove, add = _plan(findings)
    edits: list[tuple[int, int, str]] = []
    configs: dict[int, dict[str, Any]] = {id(c): copy.deepcopy(c.value) for c in parsed.configs}
    by_section = {c.section: c for c in parsed.configs}

    def occurrence_of(finding: Finding) -> list[Occurrence]:
        return [
            o
            for o in parsed.occurrences
            if o.line == finding.line and (o.setting == finding.setting or o.setting.startswith(finding.setting + "."))
        ]

    for finding in remove:
        for occ in occurrence_of(finding):
            if occ.kind in ("additional_config", "compilation_config") and occ.origin not in ("flag", "-O"):
                config = next((c for c in parsed.configs if c.value_word in occ.words or c.flag in occ.words), None)
                if config is not None:
                    _drop_path(configs[id(config)], finding.setting.split(".", 1)[1])
                    continue
            for word in occ.words:
                edits.append((word.start, word.end, ""))
    lines_to_add: list[str] = []
    appended: list[str] = []
    for setting, value in add:
        kind, _, name = setting.partition(".")
        if kind == "env":
            lines_to_add.append(f"export {_env_text(name, value)}")
        elif kind == "flag":
            appended.append(name if value is None else f"{name} {shlex.quote(str(value))}")
        else:
            config = by_section.get(kind)
            if config is None:
                config = ConfigArg(kind, None, None, {})  # type: ignore[arg-type]
                by_section[kind] = config
                configs[id(config)] = {}
            _set_path(configs[id(config)], name, value)
    for config in by_section.values():
        new_value = configs[id(config)]
        rendered = shlex.quote(json.dumps(new_value, separators=(", ", ": ")))
        if config.flag is None:
            if new_value:
                flag = "--additional-config" if config.section == "additional_config" else "--compilation-config"
                appended.append(f"{flag} {rendered}")
        elif new_value != config.value:
            target = config.value_word or config.flag
            if new_value:
                edits.append((target.start, target.end, rendered))
            else:
                edits.append((config.flag.start, config.flag.end, ""))
                if config.value_word is not None:
                    edits.append((config.value_word.start, config.value_word.end, ""))
    launcher = parsed.launcher
    if appended:
        if launcher is None:
            raise WorkbenchError(f"{parsed.where}: --fix must add {appended[0]!r}, but no vllm serve command was found")
        end = launcher.words[-1].end
        edits.append((end, end, " " + " ".join(appended)))
    if lines_to_add:
        at = _line_start(text, launcher.words[0].start) if launcher is not None else len(text)
        edits.append((at, at, "\n".join(lines_to_add) + "\n"))
    out = text
    for start, end, replacement in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        out = out[:start] + replacement + out[end:]
    return _tidy(out)


def _line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def _tidy(text: str) -> str:
    """Drop lines an edit emptied (`export` alone, a continuation with nothing on it) and double spaces."""
    out = []
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped in {"export", "\\"}:
            continue
        out.append(line.replace("  \\", " \\") if "  \\" in line and line.strip() != "\\" else line)
    return "".join(out)


# -- recipes -------------------------------------------------------------------------------------------------


def fix_recipe(text: str, findings: list[Finding]) -> str:
    data = yaml.safe_load(text) or {}
    remove, add = _plan(findings)
    engine = data.setdefault("engine", {})
    env = data.setdefault("env", {})
    for finding in remove:
        kind, _, name = finding.setting.partition(".")
        if kind == "env":
            env.pop(name, None)
        elif kind == "flag":
            field = name.lstrip("-").replace("-", "_")
            engine.pop(field, None)
            engine["extra_args"] = [a for a in engine.get("extra_args", []) if a.split("=", 1)[0] != name]
        elif kind in ("additional_config", "compilation_config"):
            section = engine.get(kind)
            if isinstance(section, dict):
                _drop_path(section, name)
                if not section:
                    engine.pop(kind)
    for setting, value in add:
        kind, _, name = setting.partition(".")
        if kind == "env":
            env[name] = str(value)
        elif kind == "flag":
            engine.setdefault("extra_args", []).extend([name] if value is None else [name, str(value)])
        else:
            _set_path(engine.setdefault(kind, {}), name, value)
    for key in ("engine", "env"):
        if not data.get(key):
            data.pop(key, None)
    if "extra_args" in engine and not engine["extra_args"]:
        engine.pop("extra_args")
    header = "# migrated by `ascend-workbench lint --fix` (comments of the original are not kept)\n"
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def write_fix(parsed: ParsedInput, findings: list[Finding], out: Path, source: Path | None) -> str:
    """Write the migrated copy to `out` and return the unified diff against the input."""
    out = Path(out)
    if source is not None and out.resolve() == source.resolve():
        raise WorkbenchError(f"--fix {out}: that is the input itself; --fix writes a migrated copy elsewhere")
    new = fix_recipe(parsed.text, findings) if parsed.is_recipe else fix_script(parsed, findings)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(new, encoding="utf-8")
    name = str(source) if source else parsed.where
    return "".join(
        difflib.unified_diff(
            parsed.text.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=name, tofile=str(out)
        )
    )
