"""A serving command, script or recipe -> the settings it makes, each with the line it is on.

Inputs are what Ascend users actually paste: a shell script with `export` lines, `VAR=x cmd` prefixes,
`vllm serve MODEL --flag value` or `python -m vllm.entrypoints.openai.api_server ...` over continued
lines, and JSON values for `--additional-config` / `--compilation-config` (also `-O '{...}'`,
`--compilation-config.key value` and `-O3`). Each setting becomes one `Occurrence` spelled the way
findings are reported: `env.NAME`, `flag.--name` (dashes: vLLM reads `--foo_bar` as `--foo-bar`),
`additional_config.a.b`, `compilation_config.key`. A JSON value that does not parse is one error
naming the flag, the line and the column.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import WorkbenchError
from workbench.lint.shell import Command, Word, commands

ENV_NAME = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
VALID_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# An upper-case name with a hyphen or a dot where an assignment stands (`export VLLM-USE-V1=1`): not a
# variable to the shell, but plainly meant as one, so it is read as one and judged an invalid name
_MISTYPED_ENV = re.compile(r"^([A-Z][A-Z0-9_]*(?:[-.][A-Z0-9_]+)+)=(.*)$", re.S)
API_SERVER_MODULES = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server")
CONFIG_FLAGS = {
    "--additional-config": "additional_config",
    "-ac": "additional_config",
    "--compilation-config": "compilation_config",
    "-cc": "compilation_config",
    "-O": "compilation_config",
}
_REDIRECT = re.compile(r"^\d*(>>?|<)&?\d*$|^\d*(>>?|<)\S+$|^&>")
_WRAPPERS = {"nohup", "exec", "time", "sudo", "numactl", "taskset", "env", "stdbuf", "setsid"}


class LintInputError(WorkbenchError):
    """The input cannot be read as a serving command, script or recipe (exit 2)."""


@dataclass(frozen=True)
class Occurrence:
    setting: str
    value: Any  # env: text; flag: text or None (bare); config keys: the JSON value
    line: int
    origin: str  # export | prefix | assignment | flag | <flag holding the JSON> | recipe
    words: tuple[Word, ...] = ()  # where it is in the text (for --fix); () for recipe-derived ones
    spelled: str = ""  # as the user wrote it, when that differs from `setting`

    @property
    def kind(self) -> str:
        return self.setting.split(".", 1)[0]

    @property
    def name(self) -> str:
        return self.setting.split(".", 1)[1]


@dataclass(frozen=True)
class ConfigArg:
    """A JSON-valued flag as written: which flag, its value word and the parsed dict."""

    section: str  # additional_config | compilation_config
    flag: Word
    value_word: Word | None
    value: dict[str, Any]


@dataclass
class ParsedInput:
    text: str
    where: str
    occurrences: list[Occurrence] = field(default_factory=list)
    configs: list[ConfigArg] = field(default_factory=list)
    launcher: Command | None = None  # the serving command (the last one, when a script starts several)
    model: str | None = None
    is_recipe: bool = False

    def settings(self) -> set[str]:
        return {o.setting for o in self.occurrences}

    def value_of(self, setting: str) -> Any:
        """The effective value (the last occurrence wins, as in the shell and in argparse)."""
        found = [o for o in self.occurrences if o.setting == setting]
        return found[-1].value if found else None


def flag_name(text: str) -> str:
    """'--foo_bar' -> '--foo-bar' (vLLM's parser treats them alike); short flags stay."""
    if text.startswith("--"):
        return "--" + text[2:].replace("_", "-")
    return text


def flatten(prefix: str, value: Any) -> Iterator[tuple[str, Any]]:
    """('additional_config', {'a': {'b': 1}}) -> ('additional_config.a.b', 1); an empty dict stays whole."""
    if isinstance(value, dict) and value:
        for key, inner in value.items():
            yield from flatten(f"{prefix}.{key}", inner)
    else:
        yield prefix, value


def _launcher_start(words: tuple[Word, ...]) -> int | None:
    """Index of the first argument after `vllm serve` or `python -m vllm.entrypoints...api_server`."""
    texts = [w.text for w in words]
    for i, text in enumerate(texts):
        base = text.rsplit("/", 1)[-1]
        if base == "vllm" and i + 1 < len(texts) and texts[i + 1] == "serve":
            return i + 2
        if text == "-m" and i + 1 < len(texts) and texts[i + 1] in API_SERVER_MODULES:
            return i + 2
        if base in API_SERVER_MODULES or text.endswith("vllm/entrypoints/openai/api_server.py"):
            return i + 1
    return None


def _parse_json(text: str, flag: str, word: Word | None, where: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        line = (word.line if word else 0) + exc.lineno - 1
        raise LintInputError(
            f"{where}:{line}: the value of {flag} is not JSON ({exc.msg} at column {exc.colno} of the value); "
            "vLLM reads it with json.loads: use double quotes, true/false and no trailing commas"
        ) from None
    if not isinstance(value, dict):
        raise LintInputError(f"{where}:{word.line if word else 0}: {flag} takes a JSON object ({{...}}), not {text!r}")
    return value


def _scalar(text: str) -> Any:
    """A dotted `--x.key value`: JSON when it parses (numbers, true/false, lists), else the text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


# What a terminal paste carries before the command: `user@host:/path# `, `(venv) user@host:~$ `, `$ `, and
# the `> ` of continued lines. Blanked to spaces (not cut) so every offset into the text stays right.
_PROMPT = re.compile(r"^(\s*(?:\([^)\n]*\)\s*)?(?:[\w.-]+@[\w.-]+(?::[^\s#$]*)?[#$]|\$|>)[ \t]+)", re.M)


def parse_text(text: str, where: str = "input") -> ParsedInput:
    parsed = ParsedInput(text=text, where=where)
    blanked = _PROMPT.sub(lambda m: " " * len(m.group(1)), text)
    for command in commands(blanked, where):
        _command(parsed, command)
    return parsed


def _command(parsed: ParsedInput, command: Command) -> None:
    words = command.words
    if words[0].text == "export":
        for word in words[1:]:
            match = _assignment(word.text)
            if match and not word.text.startswith("-"):
                _env(parsed, match, word, "export")
        return
    i = 0
    while i < len(words):
        match = _assignment(words[i].text)
        if match is None:
            break
        origin = "prefix" if i + 1 < len(words) else "assignment"
        _env(parsed, match, words[i], origin)
        i += 1
    start = _launcher_start(words)
    if start is None and words[i:] and words[i].text.startswith("--"):
        start = i  # a fragment: the flags of a command posted without its first line
    if start is None:
        return
    parsed.launcher = command
    _flags(parsed, words[start:])


def _assignment(text: str) -> re.Match[str] | None:
    return ENV_NAME.match(text) or _MISTYPED_ENV.match(text)


def _env(parsed: ParsedInput, match: re.Match[str], word: Word, origin: str) -> None:
    parsed.occurrences.append(Occurrence(f"env.{match.group(1)}", match.group(2), word.line, origin, (word,)))


def _flags(parsed: ParsedInput, words: tuple[Word, ...]) -> None:
    i = 0
    seen_flag = False
    while i < len(words):
        word = words[i]
        text = word.text
        if _REDIRECT.match(text) and not text.startswith("-"):
            i += 2 if re.fullmatch(r"\d*(>>?|<)", text) else 1
            continue
        if not text.startswith("-") or text == "-":
            if not seen_flag and parsed.model is None:
                parsed.model = text  # `vllm serve MODEL --flags`
            i += 1
            continue
        seen_flag = True
        name, value, value_word, inline = text, None, None, False
        if text.startswith("--") and "=" in text:
            name, value = text.split("=", 1)
            inline = True
        elif re.fullmatch(r"-O\d+", text):
            name, value, inline = "-O", text[2:], True
        elif text.startswith("-O.") or text.startswith("-O{"):
            name, value, inline = "-O", text[2:], True
        nxt = words[i + 1] if i + 1 < len(words) else None
        if not inline and nxt is not None and (not nxt.text.startswith("-") or re.fullmatch(r"-\d+(\.\d+)?", nxt.text)):
            if not _REDIRECT.match(nxt.text):
                value, value_word = nxt.text, nxt
        consumed = 1 if inline or value_word is None else 2
        _flag(parsed, name, value, word, value_word)
        i += consumed


def _flag(parsed: ParsedInput, spelled: str, value: str | None, word: Word, value_word: Word | None) -> None:
    name = flag_name(spelled)
    words = (word,) if value_word is None else (word, value_word)
    dotted = None
    for flag, section in CONFIG_FLAGS.items():
        if name.startswith(flag + "."):
            dotted = (section, spelled.split(".", 1)[1])  # the key as written (underscores are its own)
        elif name == "-O" and value is not None and value.startswith("."):
            dotted = (section, value[1:].split("=", 1)[0]) if section == "compilation_config" else dotted
    if name == "-O" and value is not None and value.startswith(".") and "=" in value:
        key, _, raw = value[1:].partition("=")
        parsed.occurrences.append(
            Occurrence(f"compilation_config.{key}", _scalar(raw), word.line, "-O", words, spelled)
        )
        return
    if dotted is not None:
        section, key = dotted
        parsed.occurrences.append(
            Occurrence(f"{section}.{key}", _scalar(value) if value is not None else True, word.line, spelled, words)
        )
        return
    if name in CONFIG_FLAGS and value is not None and (value.lstrip().startswith("{") or name != "-O"):
        section = CONFIG_FLAGS[name]
        data = _parse_json(value, spelled, value_word or word, parsed.where)
        if any(c.section == section for c in parsed.configs):
            # vLLM takes the last JSON value whole (no merge): the earlier keys never take effect
            parsed.occurrences[:] = [o for o in parsed.occurrences if o.kind != section or o.origin == "flag"]
        parsed.configs.append(ConfigArg(section, word, value_word, data))
        long_name = "--compilation-config" if section == "compilation_config" else "--additional-config"
        parsed.occurrences.append(Occurrence(f"flag.{long_name}", value, word.line, "flag", words, spelled))
        for path, leaf in flatten(section, data):
            parsed.occurrences.append(Occurrence(path, leaf, (value_word or word).line, spelled, words))
        return
    if name == "-O" and value is not None:
        parsed.occurrences.append(Occurrence("flag.-O", value, word.line, "flag", words, spelled))
        return
    parsed.occurrences.append(
        Occurrence(f"flag.{name}", value, word.line, "flag", words, spelled if spelled != name else "")
    )


def parse_words(words: tuple[Word, ...], where: str, text: str = "") -> ParsedInput:
    """Settings of a serving command given as words that already carry their lines (a manifest's argument
    list, a Dockerfile's exec form): the launcher is found in them as in a script."""
    parsed = ParsedInput(text=text, where=where)
    start = _launcher_start(words)
    _flags(parsed, words[start:] if start is not None else words)
    return parsed


def _line_of(text: str, key: str) -> int:
    """1-based line of the first `key:` in a YAML text (0 when not found)."""
    match = re.search(rf"^\s*['\"]?{re.escape(key)}['\"]?\s*:", text, re.M)
    return text.count("\n", 0, match.start()) + 1 if match else 0


def parse_argv(
    argv: tuple[str, ...] | list[str],
    env: dict[str, str],
    where: str,
    text: str = "",
    origin: str = "recipe",
) -> ParsedInput:
    """Settings of a command given as an argument list and an environment (a recipe's, or a launch's).

    Line numbers point at the YAML key the setting came from when `text` is the recipe's YAML.
    """
    parsed = ParsedInput(text=text, where=where, is_recipe=True)
    for name, value in env.items():
        line = _line_of(text, name)
        parsed.occurrences.append(
            Occurrence(f"env.{name}", value, line, origin, (Word(f"{name}={value}", -1, -1, line),))
        )
    words = []
    for arg in argv:
        key = arg[2:].split("=", 1)[0].replace("-", "_") if arg.startswith("--") else ""
        words.append(Word(arg, -1, -1, _line_of(text, key) if key else 0))
    _flags(parsed, tuple(words))
    return parsed
