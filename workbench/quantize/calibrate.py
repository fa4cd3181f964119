"""Calibration for static W8A8: sample texts from a data set, run through the float model, ranges per layer.

The texts come from `workbench.evaluate.datasets` (one reader of data sets for the whole workbench):
the default `calibration` is its `calibration_set` — half HumanEval problems from the end of the set,
half shipped prose passages — chosen so that an evaluation of the first HumanEval problems or of the
`text` set never scores what the scales were fitted on. Any other data-set name or JSONL file works.

The float model runs in float32 on the backend's own executor (the reference numerics), one sample per
forward pass, under a tqdm bar; each linear's input range is observed by
`ascend_backend.quantization.observe_linear_inputs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ascend_backend.models import Executor, SamplingParams
from ascend_backend.models.executor import default_block_size
from ascend_backend.quantization import ActivationRange, observe_linear_inputs
from workbench.errors import WorkbenchError
from workbench.evaluate import datasets
from workbench.quantize.request import DEFAULT_CALIBRATION


def calibration_texts(source: str, count: int) -> tuple[list[str], dict]:
    """`count` texts from `source` (data-set name or JSONL file) and a record of where they came from."""
    if source == DEFAULT_CALIBRATION:
        texts = datasets.calibration_texts(count)
        return texts, {"dataset": DEFAULT_CALIBRATION, "samples": len(texts)}
    dataset = datasets.load_dataset(source)
    if len(dataset) < count:
        raise WorkbenchError(
            f"--calibration {source}: has {len(dataset)} problems, fewer than --num-samples {count}; "
            "lower --num-samples or use a larger set"
        )
    problems = dataset.problems[:count]
    return [p.plain_text() for p in problems], {"dataset": dataset.name, "digest": dataset.digest, "samples": count}


def tokenize(model_dir: Path, texts: Sequence[str], max_tokens: int) -> list[list[int]]:
    """Token ids of each text, cut to `max_tokens` (empty texts are an error: they calibrate nothing)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    ids = [tokenizer(text)["input_ids"][:max_tokens] for text in texts]
    empty = [i for i, row in enumerate(ids) if not row]
    if empty:
        raise WorkbenchError(f"calibration sample {empty[0]} tokenizes to nothing; remove empty texts from the set")
    return ids


def observe_ranges(
    model_dir: Path, samples: Sequence[Sequence[int]], layers: Sequence[str], *, progress: bool = True
) -> dict[str, ActivationRange]:
    """Prefill every sample through the float32 executor and return each layer's observed input range.

    Prefix caching is off so that every token of every sample passes every layer (a cache hit would
    skip the shared prefix); one token is sampled per prompt, so the vocabulary projection runs once.
    """
    block_size = default_block_size("cpu")  # calibration runs in float32 on the CPU (the accuracy reference)
    executor = Executor.from_pretrained(
        model_dir,
        dtype=torch.float32,
        block_size=block_size,
        num_blocks=-(-max(len(s) for s in samples) // block_size) + 2,
        enable_prefix_caching=False,
    )
    with observe_linear_inputs(executor.model, layers) as observers:
        for sample in tqdm(samples, desc="calibrating", unit="sample", disable=not progress):
            executor.generate([list(sample)], SamplingParams(max_tokens=1, stop_at_eos=False))
    return {name: observer.result() for name, observer in observers.items()}
