"""A vLLM command line as words with lines -> engine settings, each with its origin.

The words come from wherever the deployment writes the command (a script, a manifest's `command`/`args`,
a Dockerfile's exec form, a compose `command`); the reading of flags is lint's own
(`workbench.lint.command.parse_words`), so `import` and `lint` agree on what a command sets. Values are
expanded with the environment the process gets (`workbench.deploy.expand`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from workbench.deploy.expand import expand
from workbench.deploy.model import Origin, Setting
from workbench.lint.command import API_SERVER_MODULES, parse_words
from workbench.lint.shell import Word


@dataclass(frozen=True)
class Flags:
    flags: tuple[Setting, ...]
    unresolved: tuple[str, ...]


def launcher_of(texts: Sequence[str]) -> str | None:
    """'vllm serve' or 'api_server' when the words start vLLM's OpenAI server somewhere, else None."""
    for i, text in enumerate(texts):
        base = text.rsplit("/", 1)[-1]
        if base == "vllm" and i + 1 < len(texts) and texts[i + 1] == "serve":
            return "vllm serve"
        if text in API_SERVER_MODULES or base == "api_server.py" or text.endswith(".openai.api_server"):
            return "api_server"
    return None


def words_at(texts: Sequence[str], lines: Sequence[int]) -> tuple[Word, ...]:
    """Words for a list of arguments whose lines are known (offsets are not: nothing edits them in place)."""
    return tuple(Word(text, -1, -1, line) for text, line in zip(texts, lines))


def read_flags(words: tuple[Word, ...], where: str, env: Mapping[str, Setting], via: str) -> Flags:
    """The model and flags of a command (`words` from the launcher on, or an image entrypoint's arguments)."""
    parsed = parse_words(words, where)
    found: list[Setting] = []
    missing: list[str] = []
    if parsed.model is not None:
        line = next((w.line for w in words if w.text == parsed.model), words[0].line if words else 0)
        found.append(_setting("model", parsed.model, Origin(where, line, via), env, missing))
    for occ in parsed.occurrences:
        if occ.kind != "flag":
            continue  # JSON sections are kept whole under their flag; lint flattens them again
        value = None if occ.value is None else str(occ.value)
        found.append(_setting(occ.setting, value, Origin(where, occ.line, via), env, missing))
    return Flags(tuple(found), tuple(dict.fromkeys(missing)))


def _setting(key: str, value: str | None, origin: Origin, env: Mapping[str, Setting], missing: list[str]) -> Setting:
    if value is None or "$" not in value:
        return Setting(key, value, origin)
    expanded = expand(value, env)
    missing.extend(expanded.missing)
    return Setting(key, expanded.text, origin, expanded.origins)
