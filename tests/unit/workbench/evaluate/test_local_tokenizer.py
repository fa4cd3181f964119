"""The local tokenizer (servers without /tokenize, and the quantize autopilot's executor) renders chat to ids."""

from __future__ import annotations

from workbench.evaluate.datasets import ChatMessage, Problem
from workbench.evaluate.endpoints import LocalTokenizer


def test_a_chat_prompt_tokenizes_to_token_ids(tiny_dir):
    tokenizer = LocalTokenizer(tiny_dir)
    ids = tokenizer.encode_chat(Problem("chat/1", messages=(ChatMessage("user", "Name a colour."),)))
    # transformers 5 returns a BatchEncoding; iterating it would give its keys ('input_ids', ...)
    assert ids and all(isinstance(i, int) for i in ids)
    assert tokenizer.encode("Name a colour.", add_special_tokens=False)[0] in ids
