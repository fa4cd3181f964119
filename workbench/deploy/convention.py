"""Environment variables -> engine flags, by the convention a service declares (docs/METHOD.md §1).

Serverless workers and many charts never write `--max-model-len`: they set `MAX_MODEL_LEN` and a launcher
of their own turns it into the flag. The convention is read from the service (`pysource.convention`: the
module that does the turning) or given as a mapping file:

    # convention.yaml
    flags: {MAX_MODEL_LEN: --max-model-len, MODEL_ID: --model}
    booleans: [--enforce-eager]          # truthy -> the bare flag, falsy -> left out
    negatable: [--enable-prefix-caching] # falsy -> --no-enable-prefix-caching

Each flag made this way keeps two origins: where the variable is set, and where the convention maps it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from workbench.deploy.model import Convention, Origin, Setting
from workbench.errors import WorkbenchError

TRUE = {"true", "1", "yes", "on"}
FALSE = {"false", "0", "no", "off"}


def apply(convention: Convention, env: Sequence[Setting]) -> tuple[Setting, ...]:
    """The flags `env` makes under `convention`, in the environment's order (later settings win)."""
    found: dict[str, Setting] = {}
    for setting in env:
        flag = convention.flags.get(setting.name)
        if flag is None or setting.value is None or setting.value.strip() in ("", "None"):
            continue
        via = convention.origins.get(setting.name, Origin("convention", 0))
        origin = Origin(setting.origin.file, setting.origin.line, f"{setting.name} -> {flag}")
        trail = (*setting.resolved_from, Origin(via.file, via.line, via.via or "convention"))
        value = setting.value.strip()
        if flag in convention.booleans:
            truthy = value.lower() in TRUE
            if not truthy and value.lower() not in FALSE:
                continue  # the service refuses it at start; lint of the value is not this reader's job
            found.pop(flag, None)
            found.pop(f"--no-{flag[2:]}", None)
            if truthy:
                found[flag] = Setting(f"flag.{flag}", None, origin, trail)
            elif flag in convention.negatable:
                found[f"--no-{flag[2:]}"] = Setting(f"flag.--no-{flag[2:]}", None, origin, trail)
            continue
        key = "model" if flag == "--model" else f"flag.{flag}"
        found[flag] = Setting(key, value, origin, trail)
    return tuple(found.values())


def load_mapping(path: str | Path) -> Convention:
    """A convention written down as a mapping file (see the module docstring)."""
    from workbench.recipes.reader import read_yaml_mapping

    path = Path(path)
    data = read_yaml_mapping(path, "convention mapping", "'flags'")
    flags = data.get("flags")
    if not isinstance(flags, dict) or not all(str(v).startswith("-") for v in flags.values()):
        raise WorkbenchError(
            f"{path}: 'flags' maps environment names to flags, e.g. {{MAX_MODEL_LEN: --max-model-len}}"
        )
    text = path.read_text(encoding="utf-8")
    origins = {name: Origin(str(path), _line(text, name), "convention file") for name in flags}
    return Convention(
        {str(k): str(v) for k, v in flags.items()},
        frozenset(map(str, data.get("booleans", ()))) | frozenset(map(str, data.get("negatable", ()))),
        frozenset(map(str, data.get("negatable", ()))),
        frozenset(),
        origins,
    )


def _line(text: str, name: str) -> int:
    at = text.find(name)
    return text.count("\n", 0, at) + 1 if at >= 0 else 0
