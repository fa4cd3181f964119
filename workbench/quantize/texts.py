"""The texts the autopilot scores: a dev split the search reads, a disjoint test split the verdict reads.

Problems come from `workbench.evaluate`'s data sets (HumanEval and the shipped text set by default; the
calibration set is disjoint from both, see `evaluate.datasets.calibration_set`). Each data set's first
`limit` problems are split by position: even positions are dev, odd ones test, so both splits hold code
and prose and neither ever sees the other's problems.

What is scored in each text (`Target`):

    reference     the problem's reference continuation (HumanEval's canonical solution, the text set's
                  continuation): accuracy on text written by people
    float-greedy  the float model's own greedy continuation of the prompt (`greedy_tokens` tokens):
                  fidelity to what the float model would have said. Every token is one the float model
                  found likely, so quantization error moves it even where a model is poor at the
                  reference (a 135M model on HumanEval; the random tiny model, whose reference NLL is
                  flat at ~log(vocab) whatever its layers do)

Texts are token ids, tokenized once with the model's own tokenizer (the prompt alone, then the scored
continuation, as `evaluate.nll` does), so the executor and a served engine score the very same tokens.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from workbench.errors import WorkbenchError
from workbench.evaluate.datasets import Problem, calibration_texts, load_dataset
from workbench.evaluate.endpoints import LocalTokenizer
from workbench.evaluate.nll import tokenize_problem
from workbench.quantize.evalcache import EvalCache, digest
from workbench.quantize.plan_model import PlanModel, ScoredText

DEFAULT_DATASETS = ("humaneval", "text")


class Target(str, enum.Enum):
    REFERENCE = "reference"
    FLOAT_GREEDY = "float-greedy"


@dataclass(frozen=True)
class Splits:
    dev: tuple[ScoredText, ...]
    test: tuple[ScoredText, ...]
    target: Target

    @property
    def digest(self) -> str:
        return digest(
            {"dev": [(t.id, t.ids, t.start) for t in self.dev], "test": [(t.id, t.ids, t.start) for t in self.test]}
        )

    def describe(self) -> dict:
        return {
            "target": self.target.value,
            "dev_texts": len(self.dev),
            "test_texts": len(self.test),
            "dev_tokens": sum(t.scored for t in self.dev),
            "test_tokens": sum(t.scored for t in self.test),
            "digest": self.digest,
        }


def problems_of(datasets: Sequence[str], limit: int | None) -> list[tuple[str, list[Problem]]]:
    """(data-set name, its first `limit` problems) per data set."""
    out = []
    for name in datasets:
        dataset = load_dataset(name, limit)
        if len(dataset) < 2:
            raise WorkbenchError(f"--dataset {name}: {len(dataset)} problem(s); the dev and test splits need 2 or more")
        out.append((dataset.name, list(dataset.problems)))
    return out


def _prompt_and_reference(problem: Problem, tokenizer: LocalTokenizer, max_tokens: int) -> tuple[tuple, tuple]:
    tokens = tokenize_problem(problem, tokenizer)
    prompt = tokens.prompt_ids[-(max_tokens // 2) :] if len(tokens.prompt_ids) > max_tokens // 2 else tokens.prompt_ids
    return tuple(prompt), tuple(tokens.reference_ids[: max_tokens - len(prompt)])


def build_splits(
    model_dir: Path,
    datasets: Sequence[str] = DEFAULT_DATASETS,
    *,
    limit: int | None = 24,
    target: Target = Target.REFERENCE,
    max_tokens: int = 384,
    greedy_tokens: int = 32,
    model: PlanModel | None = None,
    cache: EvalCache | None = None,
) -> Splits:
    """Dev and test texts from the data sets' first `limit` problems (see the module docstring).

    A text is at most `max_tokens` long: a long prompt keeps its last half of that, and the scored part
    is cut to fit. float-greedy continuations come from `model` (all FLOAT) and are cached in `cache`.
    """
    tokenizer = LocalTokenizer(Path(model_dir))
    dev: list[ScoredText] = []
    test: list[ScoredText] = []
    for name, problems in problems_of(datasets, limit):
        for index, problem in enumerate(problems):
            prompt, reference = _prompt_and_reference(problem, tokenizer, max_tokens)
            if target is Target.REFERENCE and not reference:
                continue  # no reference: nothing to score
            text = ScoredText(f"{name}/{problem.id}", prompt + (reference or (0,)), len(prompt))
            (dev if index % 2 == 0 else test).append(text)
    if target is Target.FLOAT_GREEDY:
        if model is None:
            raise WorkbenchError("the float-greedy target needs the float model to continue the prompts")
        continued = greedy_continuations(model, [t for t in dev + test], greedy_tokens, cache)
        dev = [continued[t.id] for t in dev]
        test = [continued[t.id] for t in test]
    if not dev or not test:
        raise WorkbenchError(f"the data sets {list(datasets)} gave no text to score; raise --limit")
    return Splits(tuple(dev), tuple(test), target)


def greedy_continuations(
    model: PlanModel, texts: Sequence[ScoredText], tokens: int, cache: EvalCache | None
) -> dict[str, ScoredText]:
    """Each text's prompt (ids[:start]) continued greedily by the float model for `tokens` tokens."""
    from ascend_backend.models import Executor, SamplingParams
    from ascend_backend.models.executor import default_block_size

    prompts = {t.id: t.ids[: t.start] for t in texts}
    key = "greedy:" + digest({"model": model.identity, "prompts": sorted(prompts.items()), "tokens": tokens})
    stored = cache.get(key) if cache is not None else None
    if stored is None:
        model.apply({})
        longest = max(len(p) for p in prompts.values()) + tokens
        block = default_block_size(next(model.model.parameters()).device)  # 128 on an NPU, 32 elsewhere
        executor = Executor(
            model.model,
            block_size=block,
            num_blocks=(longest // block + 2) * min(len(prompts), 8) + 2,
            enable_prefix_caching=False,
        )
        ids = list(prompts)
        generated: dict[str, list[int]] = {}
        with torch.inference_mode():
            for start in range(0, len(ids), 8):
                chunk = ids[start : start + 8]
                results = executor.generate(
                    [list(prompts[i]) for i in chunk], SamplingParams(max_tokens=tokens, stop_at_eos=False)
                )
                generated.update({i: list(r.token_ids) for i, r in zip(chunk, results)})
        stored = {"continuations": generated}
        if cache is not None:
            cache.put(key, stored)
    return {i: ScoredText(i, tuple(prompts[i]) + tuple(stored["continuations"][i]), len(prompts[i])) for i in prompts}


def calibration(model_dir: Path, count: int, max_tokens: int = 256) -> tuple[ScoredText, ...]:
    """The calibration set's texts (`evaluate.datasets.calibration_texts`), every token scored (proxies)."""
    tokenizer = LocalTokenizer(Path(model_dir))
    out = []
    for index, text in enumerate(calibration_texts(count)):
        ids = tokenizer.encode(text, add_special_tokens=True)[:max_tokens]
        if len(ids) >= 2:
            out.append(ScoredText(f"calibration/{index}", tuple(ids), 1))
    return tuple(out)
