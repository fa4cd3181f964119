"""The executor against Hugging Face transformers on the same checkpoint, in float32.

Logits must agree closely and greedy tokens must be identical, for the tiny Qwen2 and the real
SmolLM2 (Llama): single prompts, a batch of different lengths sharing a prefix (the prefix-cache hit
path), and a prompt spanning several KV blocks.
"""

from __future__ import annotations

import pytest
import torch

from ascend_backend.models import Executor, SamplingParams

transformers = pytest.importorskip("transformers")

MODELS = ["tiny", pytest.param("smollm2", marks=pytest.mark.slow)]
# Greedy tokens compared per prompt. SmolLM2's 30 layers make each token slow on 2 cores (32 tokens took
# about 22 s a case, both sides together, in CI): 16 tokens halve that and still span many decode steps.
NEW_TOKENS = {"tiny": 32, "smollm2": 16}


@pytest.fixture(scope="module", params=MODELS)
def pair(request):
    from workbench.embedded_models.catalog import prepare

    path = prepare(request.param)
    hf = transformers.AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    executor = Executor.from_pretrained(path, dtype=torch.float32, block_size=32, num_blocks=64)
    return request.param, hf, tokenizer, executor


def hf_greedy(hf, ids: list[int], n: int) -> list[int]:
    with torch.inference_mode():
        out = hf.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=n,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
        )
    return out[0, len(ids) :].tolist()


PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    ",
    "Once upon a time, in a small village by the sea, there lived",
]


def test_prompt_logits_match(pair):
    name, hf, tokenizer, executor = pair
    ids = tokenizer(PROMPTS[2])["input_ids"]
    with torch.inference_mode():
        expected = hf(torch.tensor([ids])).logits[0].float()
    actual = executor.prompt_logits(ids)
    diff = (actual - expected).abs().max().item()
    print(f"{name}: max |logit diff| = {diff:.3e}")
    assert diff < 2e-3 * max(1.0, expected.abs().max().item())


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_tokens_identical(pair, prompt):
    name, hf, tokenizer, executor = pair
    ids, n = tokenizer(prompt)["input_ids"], NEW_TOKENS[name]
    (result,) = executor.generate([ids], SamplingParams(max_tokens=n, stop_at_eos=False))
    assert list(result.token_ids) == hf_greedy(hf, ids, n)


def test_batch_with_shared_prefix_hits_the_cache_and_matches(pair):
    name, hf, tokenizer, executor = pair
    shared = tokenizer("You are a helpful assistant. Answer briefly and precisely. " * 4)["input_ids"]
    tails = ["What is two plus two?", "Name a colour.", "Where is Paris? Tell me about its history."]
    prompts = [shared + tokenizer(t)["input_ids"] for t in tails]
    assert len({len(p) for p in prompts}) == len(prompts)  # different lengths
    n = NEW_TOKENS[name]
    results = executor.generate(prompts, SamplingParams(max_tokens=n, stop_at_eos=False))
    assert any(r.num_cached_prompt_tokens >= 32 for r in results[1:]), "expected prefix-cache hits"
    for prompt, result in zip(prompts, results):
        assert list(result.token_ids) == hf_greedy(hf, prompt, n)


def test_long_prompt_spans_several_blocks(pair):
    name, hf, tokenizer, executor = pair
    ids = tokenizer(" ".join(f"item {i} is {i * 7 % 13}." for i in range(40)))["input_ids"][:150]
    n = NEW_TOKENS[name]
    assert len(ids) > 4 * executor.block_size
    (result,) = executor.generate([ids], SamplingParams(max_tokens=n, stop_at_eos=False))
    assert list(result.token_ids) == hf_greedy(hf, ids, n)
