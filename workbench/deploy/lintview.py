"""An engine container as lint reads a command, so `import` judges a deployment with lint's own facts
(`workbench.lint.api`) and the lint of a deployment file reads it with `import`'s readers."""

from __future__ import annotations

from workbench.deploy.argv import words_at
from workbench.deploy.model import Container
from workbench.deploy.vllm_config import FALSE_SWITCH
from workbench.lint.command import Occurrence, ParsedInput, parse_words


def parsed_for(container: Container, consumed: frozenset[str] = frozenset()) -> ParsedInput:
    """The container's model, flags and environment as lint's `ParsedInput` (lines are each setting's own).

    `consumed`: environment names the service's own launcher turns into flags (its convention); they are
    judged as the flags they become, not as variables vLLM would read."""
    texts: list[str] = []
    lines: list[int] = []
    model = container.model()
    if model:
        texts.append(model)
        lines.append(next(s.origin.line for s in container.flags if s.key in ("model", "flag.--model")))
    for setting in container.flags:
        if setting.key in ("model", "flag.--model") or setting.origin.via == FALSE_SWITCH:
            continue
        texts.append(setting.name)
        lines.append(setting.origin.line)
        if setting.value is not None:
            texts.append(setting.value)
            lines.append(setting.origin.line)
    parsed = parse_words(words_at(texts, lines), container.source)
    parsed.model = model
    for setting in container.env:
        if setting.value is not None and not setting.value.startswith("<") and setting.name not in consumed:
            parsed.occurrences.append(Occurrence(setting.key, setting.value, setting.origin.line, "export"))
    return parsed
