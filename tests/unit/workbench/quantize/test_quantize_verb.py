"""`ascend-workbench quantize` on the tiny model: both formats, the report, and one-line errors."""

from __future__ import annotations

import json

import pytest
import torch

from ascend_backend.models import Executor, SamplingParams
from ascend_backend.quantization import QuantFormat, checkpoint_format, read_checkpoint
from workbench import cli
from workbench.quantize.checkpoint import REPORT_FILE, quantize_checkpoint
from workbench.quantize.request import QuantizeRequest, Scheme


def safe_open_keys(file) -> list[str]:
    from safetensors import safe_open

    with safe_open(str(file), framework="pt") as handle:
        return list(handle.keys())


def quantize(*args: str) -> int:
    return cli.main(["quantize", "--model", "tiny", *args])


def test_static_compressed_tensors_end_to_end(tiny_dir, tmp_path, capsys):
    out = tmp_path / "tiny-w8a8"
    code = quantize(
        "--scheme",
        "w8a8-static",
        "--format",
        "compressed-tensors",
        "--out",
        str(out),
        "--calibration",
        "text",
        "--num-samples",
        "4",
    )
    assert code == 0, capsys.readouterr().err
    assert "w8a8-static in compressed-tensors layout" in capsys.readouterr().out
    assert checkpoint_format(out) is QuantFormat.COMPRESSED_TENSORS
    assert {"tokenizer.json", "config.json", "model.safetensors", REPORT_FILE} <= {p.name for p in out.iterdir()}
    report = json.loads((out / REPORT_FILE).read_text())
    assert report["calibration"]["dataset"] == "text" and report["calibration"]["samples"] == 4
    assert report["provenance"]["stack"]["versions"]["torch"].startswith("2.")
    static = [layer for layer in report["layers"] if layer["type"] == "W8A8"]
    assert static and all(layer["min"] <= 0 <= layer["max"] or layer["min"] < layer["max"] for layer in static)
    config = json.loads((out / "config.json").read_text())
    assert config["quantization_config"]["quant_method"] == "compressed-tensors"
    # symmetric static inputs: the only static form vllm-ascend's compressed-tensors path takes
    groups = config["quantization_config"]["config_groups"].values()
    assert all(group["input_activations"]["symmetric"] is True for group in groups)
    assert not [name for name in safe_open_keys(out / "model.safetensors") if name.endswith("input_zero_point")]
    (result,) = Executor.from_pretrained(out, dtype=torch.float32, num_blocks=16).generate(
        [[1, 2, 3, 4]], SamplingParams(max_tokens=4, stop_at_eos=False)
    )
    assert len(result.token_ids) == 4


def test_dynamic_msmodelslim_needs_no_calibration(tiny_dir, tmp_path, capsys):
    out = tmp_path / "tiny-ms"
    assert quantize("--scheme", "w8a8-dynamic", "--format", "msmodelslim", "--out", str(out)) == 0
    model = read_checkpoint(out)
    assert model.dtype == torch.bfloat16 and model.linears
    assert json.loads((out / REPORT_FILE).read_text())["calibration"] is None
    assert json.loads((out / "config.json").read_text()).get("quantization_config") is None


def test_tied_tiny_describes_its_lm_head_for_vllm_ascend(tiny_dir, tmp_path):
    # tiny ties its embeddings and stores no lm_head.weight, but vLLM builds an lm_head layer anyway and
    # vllm-ascend looks `lm_head.weight` up in the description (vllm-ascend issue #8367).
    from ascend_backend.quantization import msmodelslim
    from ascend_backend.quantization.files import read_tensors

    assert json.loads((tiny_dir / "config.json").read_text())["tie_word_embeddings"] is True
    out = tmp_path / "tiny-ms"
    assert quantize("--scheme", "w8a8-dynamic", "--format", "msmodelslim", "--out", str(out)) == 0
    description = msmodelslim.read_description(out)
    assert description["lm_head.weight"] == "FLOAT"
    assert "lm_head.weight" not in read_tensors(out).tensors  # described, not stored: vLLM ties it
    assert read_checkpoint(out).tied_embeddings
    (result,) = Executor.from_pretrained(out, dtype=torch.float32, num_blocks=16).generate(
        [[1, 2, 3, 4]], SamplingParams(max_tokens=2, stop_at_eos=False)
    )
    assert len(result.token_ids) == 2


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["--model", "tiny", "--scheme", "w8a8-dynamic", "--format", "msmodelslim", "--out", "{full}"],
            "exists and is not empty; choose a new directory or pass --force",
        ),
        (
            ["--model", "/no/such/dir", "--scheme", "w8a8-dynamic", "--format", "msmodelslim", "--out", "{new}"],
            "is neither an embedded model",
        ),
        (
            [
                "--model",
                "tiny",
                "--scheme",
                "w8a8-static",
                "--format",
                "msmodelslim",
                "--out",
                "{new}",
                "--calibration",
                "{missing}",
            ],
            "missing.jsonl",
        ),
        (
            [
                "--model",
                "tiny",
                "--scheme",
                "w8a8-static",
                "--format",
                "msmodelslim",
                "--out",
                "{new}",
                "--num-samples",
                "0",
            ],
            "--num-samples 0",
        ),
        (
            [
                "--model",
                "tiny",
                "--scheme",
                "w8a8-dynamic",
                "--format",
                "msmodelslim",
                "--out",
                "{new}",
                "--keep-float",
                "*.nothing",
            ],
            "matches no linear layer",
        ),
    ],
)
def test_user_errors_are_one_line_and_exit_2(tiny_dir, tmp_path, capsys, args, message):
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("user data")
    values = {"full": str(full), "new": str(tmp_path / "new"), "missing": str(tmp_path / "missing.jsonl")}
    code = cli.main(["quantize", *[a.format(**values) for a in args]])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and len(err.strip().splitlines()) == 1
    assert (full / "keep.txt").read_text() == "user data"  # nothing of the user's is touched
    assert not (tmp_path / "new").exists()


def test_an_already_quantized_model_is_refused(tiny_dir, tmp_path):
    out = tmp_path / "once"
    quantize_checkpoint(QuantizeRequest("tiny", Scheme.DYNAMIC, QuantFormat.COMPRESSED_TENSORS, out), progress=False)
    code = quantize("--scheme", "w8a8-dynamic", "--format", "msmodelslim", "--out", str(tmp_path / "twice"))
    assert code == 0  # tiny itself is float
    assert (
        cli.main(
            [
                "quantize",
                "--model",
                str(out),
                "--scheme",
                "w8a8-dynamic",
                "--format",
                "msmodelslim",
                "--out",
                str(tmp_path / "thrice"),
            ]
        )
        == 2
    )


def test_an_interrupted_run_leaves_nothing_behind(tiny_dir, tmp_path, monkeypatch):
    from workbench.quantize import checkpoint

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint, "write_report", interrupted)
    with pytest.raises(KeyboardInterrupt):
        quantize_checkpoint(
            QuantizeRequest("tiny", Scheme.DYNAMIC, QuantFormat.MSMODELSLIM, tmp_path / "out"), progress=False
        )
    assert list(tmp_path.iterdir()) == []  # neither the output nor a staging directory
