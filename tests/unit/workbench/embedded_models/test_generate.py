"""`ascend-workbench generate` and `workbench.embedded_models.generate` on the tiny model."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
import torch

from workbench import cli
from workbench.embedded_models.generation import Engine, FinishReason, GenerationRequest, generate
from workbench.errors import WorkbenchError


def greedy_by_hand(model, prompt_ids: list[int], max_tokens: int, stop_ids: set[int]) -> list[int]:
    """Greedy decoding as a plain loop of full forwards (no KV cache, no `generate`): the reference."""
    import torch

    ids = list(prompt_ids)
    new: list[int] = []
    with torch.no_grad():
        for _ in range(max_tokens):
            logits = model(torch.tensor([ids])).logits[0, -1].double()  # [vocab]
            token = int(torch.argmax(logits))
            new.append(token)
            ids.append(token)
            if token in stop_ids:
                break
    return new


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_json_matches_greedy_reference(tiny_dir: Path, tiny_loaded, capsys: pytest.CaptureFixture[str]) -> None:
    tokenizer, model = tiny_loaded
    code, out, _ = run_cli(
        capsys, "generate", "--model", "tiny", "--prompt", "Once upon a time", "--max-tokens", "6", "--json"
    )
    assert code == 0
    payload = json.loads(out)
    prompt_ids = tokenizer("Once upon a time")["input_ids"]
    assert payload["prompt_token_ids"] == prompt_ids
    expected = greedy_by_hand(model, prompt_ids, 6, {0, 2})
    assert payload["token_ids"] == expected
    assert payload["text"] == tokenizer.decode(expected, skip_special_tokens=True)
    assert payload["finish_reason"] == ("stop" if expected[-1] in {0, 2} else "length")
    assert (payload["engine"], payload["device"], payload["dtype"]) == ("transformers", "cpu", "float32")
    assert payload["model_dir"] == str(tiny_dir)


def test_cli_plain_output_is_the_text(tiny_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "generate", "--model", str(tiny_dir), "--prompt", "Hello", "--max-tokens", "3")
    assert code == 0
    reference = generate(GenerationRequest(model=str(tiny_dir), prompt="Hello", max_tokens=3))
    assert out == reference.text + "\n"


def test_chat_prompt_uses_the_template_and_bf16_runs(tiny_dir: Path, tiny_loaded) -> None:
    tokenizer, _ = tiny_loaded
    result = generate(GenerationRequest(model="tiny", prompt="Hi", max_tokens=4, chat=True, dtype="bfloat16"))
    assert result.prompt_text == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert list(result.prompt_token_ids) == tokenizer(result.prompt_text, add_special_tokens=False)["input_ids"]
    assert result.dtype == "bfloat16"
    assert 1 <= len(result.token_ids) <= 4
    assert result.finish_reason in (FinishReason.STOP, FinishReason.LENGTH)


def test_sampling_is_reproducible_with_a_seed(tiny_dir: Path) -> None:
    request = GenerationRequest(model="tiny", prompt="The", max_tokens=8, temperature=1.5, seed=7)
    assert generate(request).token_ids == generate(request).token_ids


def executor_importable() -> bool:
    try:
        importlib.import_module("ascend_backend.models")
    except ImportError:
        return False
    return True


def test_executor_engine_matches_transformers_or_says_it_is_not_available(
    tiny_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["generate", "--model", "tiny", "--prompt", "Paged attention", "--max-tokens", "6", "--json"]
    if not executor_importable():
        code, out, err = run_cli(capsys, *argv, "--engine", "executor")
        assert code == 2 and out == ""
        assert "--engine executor is not available yet" in err and "use --engine transformers" in err
        return
    # Same prompt ids, float32 on CPU, greedy: the backend's executor must pick the same tokens.
    reference = generate(GenerationRequest(model="tiny", prompt="Paged attention", max_tokens=6))
    result = generate(GenerationRequest(model="tiny", prompt="Paged attention", max_tokens=6, engine=Engine.EXECUTOR))
    assert result.prompt_token_ids == reference.prompt_token_ids
    assert result.token_ids == reference.token_ids
    assert result.engine is Engine.EXECUTOR


def test_user_errors_are_one_clear_line(tiny_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "generate", "--model", str(tmp_path / "missing"), "--prompt", "x")
    assert code == 2 and "neither an embedded model (tiny, smollm2, smollm2-w8a8) nor an existing directory" in err
    code, _, err = run_cli(capsys, "generate", "--model", "tiny", "--prompt", "x", "--max-tokens", "0")
    assert code == 2 and "--max-tokens must be at least 1" in err
    code, _, err = run_cli(capsys, "generate", "--model", "tiny", "--prompt", "x", "--device", "bogus")
    assert code == 2 and "--device 'bogus' is not a device name" in err
    if not torch.cuda.is_available():
        code, _, err = run_cli(capsys, "generate", "--model", "tiny", "--prompt", "x", "--device", "cuda")
        assert code == 2 and "--device 'cuda': no CUDA device visible here" in err
    with pytest.raises(WorkbenchError, match="--dtype 'int3'"):
        GenerationRequest(model="tiny", prompt="x", dtype="int3")
