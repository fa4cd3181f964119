"""`ascend-workbench dump` on a tiny Hugging Face Llama checkpoint, then `compare-dumps` on the result."""

from __future__ import annotations

import json

import pytest

from workbench.cli import main


@pytest.fixture(scope="module")
def tiny_llama_dir(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    import torch

    config = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    directory = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(directory)
    return directory


def test_dump_then_compare_fp32_against_bf16(tiny_llama_dir, tmp_path, capsys):
    ref, test = tmp_path / "fp32", tmp_path / "bf16"
    assert main(["dump", "--model", str(tiny_llama_dir), "--token-ids", "1,5,9,3", "--out", str(ref)]) == 0
    assert (
        main(
            [
                "dump",
                "--model",
                str(tiny_llama_dir),
                "--token-ids",
                "1,5,9,3",
                "--out",
                str(test),
                "--dtype",
                "bfloat16",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert f"to {test}" in out
    manifest = json.loads((ref / "manifest.json").read_text())
    assert manifest["prompt_token_ids"] == [1, 5, 9, 3] and manifest["complete"] is True

    report = tmp_path / "cmp.json"
    assert main(["compare-dumps", str(test), str(ref), "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert (
        "model.layers.0.self_attn.q_proj.output.0" in out
        and "first divergence:" in out
        and "NaN/Inf origin:   none" in out
    )
    payload = json.loads(report.read_text())
    rows = {row["key"]: row for row in payload["rows"]}
    assert (
        rows["lm_head.output.0"]["test_dtype"] == "torch.bfloat16" and rows["lm_head.output.0"]["shape"] == "[1, 4, 64]"
    )
    assert all(row["cosine"] > 0.99 for row in payload["rows"] if row["cosine"] is not None)


def test_dump_stats_only_with_module_patterns(tiny_llama_dir, tmp_path):
    out = tmp_path / "stats"
    rc = main(
        [
            "dump",
            "--model",
            str(tiny_llama_dir),
            "--token-ids",
            "2,3",
            "--out",
            str(out),
            "--stats-only",
            "--modules",
            "model.layers.*.mlp",
            "lm_head",
        ]
    )
    assert rc == 0
    lines = (out / "records.jsonl").read_text().splitlines()
    assert [json.loads(line)["module"] for line in lines] == ["model.layers.0.mlp", "model.layers.1.mlp", "lm_head"]
    assert list((out / "tensors").iterdir()) == []


def test_user_errors_exit_2_with_one_line(tiny_llama_dir, tmp_path, capsys):
    assert main(["dump", "--model", str(tmp_path), "--token-ids", "1", "--out", str(tmp_path / "o")]) == 2
    assert "is not a Hugging Face model directory" in capsys.readouterr().err
    assert main(["dump", "--model", str(tiny_llama_dir), "--token-ids", "1,x", "--out", str(tmp_path / "o")]) == 2
    assert "--token-ids '1,x' is not a comma-separated list" in capsys.readouterr().err
    assert main(["dump", "--model", str(tiny_llama_dir), "--prompt", "hello", "--out", str(tmp_path / "o")]) == 2
    assert "pass --token-ids instead of --prompt" in capsys.readouterr().err
    assert main(["compare-dumps", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_engine_dump_flags_are_checked_before_a_server_starts(tiny_llama_dir, tmp_path, capsys):
    used = tmp_path / "used"
    used.mkdir()
    (used / "keep.txt").write_text("earlier dump")
    cases = [
        (
            ["--recipe", "cpu-tiny", "--token-ids", "1,2", "--out", str(tmp_path / "a")],
            "--token-ids belongs to --model",
        ),
        (
            ["--recipe", "cpu-tiny", "--prompt", "x", "--dtype", "float32", "--out", str(tmp_path / "a")],
            "--dtype belongs to --model",
        ),
        (["--recipe", "cpu-tiny", "--prompt", "x", "--steps", "0", "--out", str(tmp_path / "a")], "at least one"),
        (["--recipe", "cpu-tiny", "--prompt", "x", "--layers", "3-1", "--out", str(tmp_path / "a")], "--layers"),
        (["--recipe", "cpu-tiny", "--prompt", "x", "--out", str(used)], "already exists and is not empty"),
        (
            ["--model", str(tiny_llama_dir), "--token-ids", "1", "--steps", "3", "--out", str(tmp_path / "b")],
            "--steps belongs to --recipe",
        ),
    ]
    for argv, words in cases:
        assert main(["dump", *argv]) == 2, argv
        assert words in capsys.readouterr().err, argv
    assert (used / "keep.txt").read_text() == "earlier dump" and not (tmp_path / "a").exists()
