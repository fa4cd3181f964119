"""`vllm serve --config FILE`: a YAML mapping of flag names to values (`max-model-len: 8192`, or with
underscores), read with each key's line. A file is taken for one when its top-level keys are flags vLLM
knows (from the flag lists the config-truth table read from vLLM's own sources)."""

from __future__ import annotations

import functools

from yaml.nodes import MappingNode, Node, SequenceNode

from workbench.deploy import nodes
from workbench.deploy.model import Origin, Setting

FALSE_SWITCH = "--config, a false switch: nothing is passed"


@functools.cache
def known_flags() -> frozenset[str]:
    from workbench.truth.table import config_table

    flags: set[str] = set()
    for version in config_table().vllm.values():
        flags |= version.flags
    return frozenset(flags)


def flag_of(key: str) -> str:
    return "--" + key.replace("_", "-")


def is_vllm_config(doc: Node) -> bool:
    if not isinstance(doc, MappingNode) or nodes.get(doc, "apiVersion") or nodes.get(doc, "services"):
        return False
    keys = [k for k, _, _ in nodes.items(doc)]
    known = [k for k in keys if flag_of(k) in known_flags() or k == "model"]
    # vLLM refuses a key it has no flag for, so a real --config file is (nearly) all flags; a workbench
    # serving recipe (name, engine, env, ...) is not
    return len(known) >= 2 and len(keys) - len(known) <= len(keys) / 4


def read_config(doc: Node, where: str) -> tuple[Setting, ...]:
    found: list[Setting] = []
    for key, value, line in nodes.items(doc):
        origin = Origin(where, line, "--config")
        if key == "model":
            found.append(Setting("model", nodes.text(value), origin))
        elif isinstance(value, (MappingNode, SequenceNode)):
            import json

            import yaml

            found.append(Setting(f"flag.{flag_of(key)}", json.dumps(yaml.safe_load(yaml.serialize(value))), origin))
        elif value.tag.endswith(":bool"):
            # vLLM's --config reader passes a true switch as the bare flag and leaves a false one out:
            # kept with its value so the setting is still traced (lint and the command skip it)
            if nodes.text(value).lower() == "true":
                found.append(Setting(f"flag.{flag_of(key)}", None, origin))
            else:
                found.append(Setting(f"flag.{flag_of(key)}", "false", Origin(where, line, FALSE_SWITCH)))
        else:
            found.append(Setting(f"flag.{flag_of(key)}", _scalar(nodes.text(value)), origin))
    return tuple(found)


def _scalar(text: str | None) -> str | None:
    return None if text is None else text.strip()
