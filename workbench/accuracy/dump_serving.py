"""An engine dump from a serving recipe: launch with dumping on, one greedy prompt, stop, read the dump.

The comparison docs/METHOD.md §8 asks for — the service under suspicion against a float32 CPU
baseline, layer by layer — needs the engine's own module outputs. `capture_engine_dump` turns a serving
recipe into that: it adds a `dump:` section (the vLLM plugin's ASCEND_BACKEND_DUMP switch) and
`enforce_eager: true` (graphs would replay without the hooks), starts the server through the one
launcher, sends the prompt once, greedily, for exactly `steps` tokens (`ignore_eos`), so the engine runs
exactly `steps` forward steps (the prefill, then one per further token), stops the server and opens
the dump. `capture_reference_for` then runs transformers in float32 on the CPU over the very tokens the
engine ran (the prompt and every generated token it fed back), so each engine step has reference rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import torch

from workbench.accuracy.dump_format import MANIFEST_FILE, WorkbenchDump
from workbench.accuracy.dump_gather import rank_directories
from workbench.errors import WorkbenchError
from workbench.recipes import ServingRecipe

REQUEST_TIMEOUT_S = 600.0  # one greedy request; a cold NPU engine may still be compiling kernels


@dataclass(frozen=True)
class EngineDumpResult:
    """What one engine dump run produced: where, from which model and tokens, and the server log."""

    directory: Path
    ranks: tuple[Path, ...]  # one directory per rank when the engine ran several (rank0 first)
    model_dir: Path | None  # the checkpoint directory, when local (needed for the reference)
    prompt: str
    text: str
    token_ids: tuple[int, ...]  # the tokens the engine ran: the prompt, then each generated token fed back
    steps: int
    records: int
    log_path: Path | None

    def describe(self) -> str:
        ranks = f" ({len(self.ranks)} ranks: {', '.join(p.name for p in self.ranks)})" if len(self.ranks) > 1 else ""
        return (
            f"wrote {self.records} tensors of {self.steps} engine step(s) to {self.directory}{ranks}; the engine ran "
            f"{len(self.token_ids)} tokens and answered {self.text!r} (server log: {self.log_path})"
        )


def _refuse_used_directory(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise WorkbenchError(
            f"dump directory {out} already exists and is not empty; choose a new --out directory "
            "(nothing was started, the existing files are untouched)"
        )


def _rank_dumps(out: Path) -> list[Path]:
    """`out` itself (one process held the model) or its rank<R> subdirectories (several ranks)."""
    if (out / MANIFEST_FILE).is_file():
        return [out]
    return rank_directories(out)


def _engine_tokens(dump: WorkbenchDump) -> tuple[int, ...]:
    """The token sequence the engine's recorded steps ran, when they are one sequence in order."""
    tokens: list[int] = []
    for step in dump.steps:
        if step.token_ids is None or (step.positions and step.positions[0] != len(tokens)):
            raise WorkbenchError(f"{dump.path}: the recorded steps are not one sequence of token ids in order")
        tokens += step.token_ids
    return tuple(tokens)


def capture_engine_dump(
    recipe_name: str | Path | ServingRecipe,
    prompt: str | Sequence[int],
    out: Path,
    *,
    steps: int = 1,
    modules: Sequence[str] = ("*",),
    layers: Sequence[int] | None = None,
    stats_only: bool = False,
    extra_env: Mapping[str, str] | None = None,
    extra_args: tuple[str, ...] = (),
    log_dir: Path | None = None,
    progress: bool = True,
) -> EngineDumpResult:
    """Launch `recipe_name` with dumping on, send `prompt` greedily for `steps` tokens, stop, open the dump.

    `recipe_name` is a recipe name, file or an already loaded (and perhaps modified) recipe; `prompt` is
    text, or token ids sent as they are (a twin run dumps both sides on exactly the same tokens).

    A request that fails after the engine finished recording (a NaN fault can make the answer
    unserialisable) still leaves a whole dump: that is reported, not raised. A request that fails
    before is a server failure, classified from the log.
    """
    from workbench.recipes import load_serving_recipe
    from workbench.serving.crash import ServerFailure, false_ready
    from workbench.serving.server import launch, resolve_model

    out = out.expanduser().resolve()
    _refuse_used_directory(out)
    base = recipe_name if isinstance(recipe_name, ServingRecipe) else load_serving_recipe(recipe_name)
    dump = {
        "dir": str(out),
        "steps": steps,
        "modules": list(modules),
        "layers": list(layers) if layers else None,
        "stats_only": stats_only,
    }
    recipe = base.with_overrides(engine={"enforce_eager": True}, dump=dump)
    with (  # never pooled: the engine counts its dump steps from its start
        launch(
            recipe, extra_env=extra_env, extra_args=extra_args, log_dir=log_dir, progress=progress, pooled=False
        ) as server,
        httpx.Client(timeout=REQUEST_TIMEOUT_S) as client,
    ):
        try:
            text = greedy_completion(client, server.url, server.model, prompt, steps)
        except httpx.HTTPError as exc:
            if _recorded_steps(out) < steps:
                log = server.log_path.read_text(errors="replace") if server.log_path else ""
                raise ServerFailure(false_ready(f"the dump request: {exc}", log, server.log_path)) from None
            text = f"(no answer: the request failed after the dump was taken: {exc})"
        log_path = server.log_path
    shown = prompt if isinstance(prompt, str) else f"<{len(prompt)} token ids>"
    return _read_result(out, shown, text, resolve_model(recipe), log_path)


def greedy_completion(client: httpx.Client, url: str, model: str, prompt: str | Sequence[int], max_tokens: int) -> str:
    """One /v1/completions request, temperature 0, exactly `max_tokens` tokens (ignore_eos): the answer text.

    No logprobs are asked for: the dump holds the tokens, and an engine under a NaN fault would answer
    with NaN logprobs that JSON cannot carry.
    """
    payload = {
        "model": model,
        "prompt": prompt if isinstance(prompt, str) else list(prompt),
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "ignore_eos": True,
        "seed": 0,
    }
    response = client.post(f"{url}/v1/completions", json=payload)
    response.raise_for_status()
    return str(response.json()["choices"][0]["text"])


def _recorded_steps(out: Path) -> int:
    """Steps of the first rank's dump that are final (0 when there is none yet)."""
    ranks = _rank_dumps(out)
    try:
        return len(WorkbenchDump(ranks[0]).steps) if ranks else 0
    except WorkbenchError:
        return 0


def _read_result(out: Path, prompt: str, text: str, model: str, log_path: Path | None) -> EngineDumpResult:
    ranks = _rank_dumps(out)
    if not ranks:
        raise WorkbenchError(
            f"the engine wrote no dump to {out}: the vLLM plugin did not load or recorded no step; check the server "
            f"log ({log_path}) for 'ascend_backend dump' and that VLLM_PLUGINS allows ascend_backend"
        )
    try:
        first = WorkbenchDump(ranks[0])
    except WorkbenchError as exc:
        raise WorkbenchError(f"{exc} (server log: {log_path})") from None
    model_dir = Path(model) if Path(model).is_dir() else None
    return EngineDumpResult(
        out,
        tuple(ranks),
        model_dir,
        prompt,
        text,
        _engine_tokens(first),
        len(first.steps),
        len(first.records),
        log_path,
    )


def capture_reference_for(result: EngineDumpResult, out: Path, *, patterns: Sequence[str] = ("*",)) -> Path:
    """transformers, float32, CPU, over the tokens the engine ran: the golden dump for `compare-dumps`."""
    from workbench.accuracy.dump import capture_dump, load_causal_lm

    if result.model_dir is None:
        raise WorkbenchError(
            "--reference needs the checkpoint on this machine; the recipe's model is not a local directory: capture "
            "the reference where it is, with `ascend-workbench dump --model DIR --token-ids ...`"
        )
    model = load_causal_lm(result.model_dir, torch.float32, "cpu")
    ids = list(result.token_ids)
    capture_dump(
        model,
        {"input_ids": torch.tensor([ids]), "use_cache": False},
        out,
        module_patterns=patterns,
        prompt_token_ids=ids,
        prompt=result.prompt,
        model_description=f"transformers float32 cpu: {result.model_dir.name} (golden for {result.directory})",
    )
    return out


__all__ = ["EngineDumpResult", "capture_engine_dump", "capture_reference_for"]
