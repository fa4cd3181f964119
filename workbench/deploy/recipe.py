"""An engine container -> the project's serving recipe (`recipes/serving/*.yaml`, `ServingRecipe`), for the
Ascend side: the picked release's changes applied (renamed and removed settings), `device: npu`, and every
field traced to the file and line it came from (`trace`, and the comment block above the YAML).

Flags the recipe has a field for become that field (`--max-model-len` -> `max_model_len`,
`--no-enable-prefix-caching` -> `engine.enable_prefix_caching: false`); `--host`/`--port` are the
launcher's; everything else is kept, in order, in `engine.extra_args`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import yaml

from workbench.deploy.model import Container, Setting
from workbench.deploy.plan import Change
from workbench.errors import WorkbenchError

TOP = {"--served-model-name": "served_model_name", "--dtype": "dtype", "--max-model-len": "max_model_len"}
INTS = {
    "--max-num-seqs",
    "--block-size",
    "--max-num-batched-tokens",
    "--tensor-parallel-size",
    "--pipeline-parallel-size",
    "--data-parallel-size",
    "--kv-cache-memory-bytes",
}
SWITCHES = {"--enable-prefix-caching", "--enable-chunked-prefill", "--enforce-eager"}
JSONS = {"--additional-config", "--compilation-config"}
LAUNCHER_OWNS = {"--host", "--port", "--config"}
DTYPES = {"auto", "float16", "bfloat16", "float32"}


@dataclass(frozen=True)
class RecipeOut:
    name: str
    container: str
    data: dict
    trace: tuple[dict, ...]  # one row per recipe field: field, value, from (file:line and how)
    notes: tuple[str, ...]

    def yaml_text(self) -> str:
        head = [f"# Serving recipe read from {self.container} by `ascend-workbench import` (docs/METHOD.md §1)."]
        head += [f"#   {row['field']}: {row['from']}" for row in self.trace]
        head += [f"# note: {n}" for n in self.notes]
        return "\n".join(head) + "\n" + yaml.safe_dump(self.data, sort_keys=False, allow_unicode=True)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "engine"


def recipe_for(container: Container, changes: list[Change], consumed: frozenset[str]) -> RecipeOut | None:
    """The Ascend recipe of one container, or None when it sets no model (named in the import's notes)."""
    removed = {(c.setting, c.where) for c in changes if c.after is None}
    renamed = {(c.setting, c.where): c.after for c in changes if c.after is not None and c.setting.startswith("env.")}
    model = container.flag("model") or container.flag("--model")
    if model is None or not model.value:
        return None
    data: dict = {
        "name": slug(container.name),
        "description": f"{container.name}, ported by ascend-workbench import",
        "device": "npu",
        "model": model.value,
    }
    trace = [{"field": "model", "value": model.value, "from": model.trace()}]
    engine: dict = {}
    extra: list[str] = []
    notes: list[str] = []
    for setting in container.flags:
        if setting.key in ("model", "flag.--model") or (setting.key, str(setting.origin)) in removed:
            continue
        field, value = _field(setting, extra)
        if field is None:
            if setting.name not in LAUNCHER_OWNS:
                trace.append(
                    {"field": f"engine.extra_args {setting.name}", "value": setting.value, "from": setting.trace()}
                )
            continue
        (data if "." not in field else engine)[field.split(".", 1)[-1]] = value
        trace.append({"field": field, "value": value, "from": setting.trace()})
    if extra:
        engine["extra_args"] = extra
    if engine:
        data["engine"] = engine
    env = _env(container, removed, renamed, consumed, trace, notes)
    if env:
        data["env"] = env
    return RecipeOut(data["name"], container.name, data, tuple(trace), tuple(notes) + container.notes)


def _field(setting: Setting, extra: list[str]) -> tuple[str | None, object]:
    flag, value = setting.name, setting.value
    if flag in LAUNCHER_OWNS:
        return None, None
    if flag in TOP and value is not None:
        if flag == "--max-model-len" and not value.isdigit() or flag == "--dtype" and value not in DTYPES:
            extra.extend([flag, value])
            return None, None
        return TOP[flag], int(value) if flag == "--max-model-len" else value
    switch = flag.replace("--no-", "--", 1)
    if switch in SWITCHES and value in (None, "false"):
        return f"engine.{switch[2:].replace('-', '_')}", not flag.startswith("--no-") and value is None
    if flag in INTS and value is not None and value.isdigit():
        return f"engine.{flag[2:].replace('-', '_')}", int(value)
    if flag == "--gpu-memory-utilization" and value is not None and re.fullmatch(r"0?\.\d+|1(\.0*)?", value):
        return "engine.gpu_memory_utilization", float(value)
    if flag == "--quantization" and value:
        return "engine.quantization", value
    if flag == "--distributed-executor-backend" and value in ("mp", "ray", "uni"):
        return "engine.distributed_executor_backend", value
    if flag in JSONS and value:
        try:
            return f"engine.{flag[2:].replace('-', '_')}", json.loads(value)
        except ValueError:
            pass
    if value != "false" or not setting.origin.via.startswith("--config, a false switch"):
        extra.extend([flag] if value is None else [flag, value])
    return None, None


def _env(container: Container, removed, renamed, consumed, trace: list[dict], notes: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for setting in container.env:
        key = (setting.key, str(setting.origin))
        if key in removed or setting.name in consumed or setting.value is None:
            continue
        if setting.value.startswith("<"):
            notes.append(f"{setting.name} comes from {setting.value} ({setting.origin}): set it where the server runs")
            continue
        name = renamed.get(key, setting.name)
        env[name] = setting.value
        trace.append({"field": f"env.{name}", "value": setting.value, "from": setting.trace()})
    return env


def validate(recipe: RecipeOut) -> None:
    """The recipe read back through the one recipe reader; a problem is one WorkbenchError naming the field."""
    from workbench.recipes.reader import validate_recipe
    from workbench.recipes.serving import ServingRecipe

    try:
        validate_recipe(ServingRecipe, recipe.data, f"recipe of {recipe.container}")
    except WorkbenchError as exc:
        raise WorkbenchError(f"{exc} (the recipe import wrote for {recipe.container}); please report it") from None
