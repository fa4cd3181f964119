"""`smollm2-w8a8`: SmolLM2-135M-Instruct quantized to W8A8 by the workbench, in compressed-tensors layout.

The quantized model the serving recipe `cpu-smollm2-w8a8`, the sweep's quantization value and
notebook 10 use. It is an embedded model built on first use like the others, and this package
registers its build (`SMOLLM2_W8A8`, entry point `ascend_workbench.model_builds`, pyproject.toml):
prepare `smollm2`, quantize it here (a static scheme would calibrate on
`workbench.evaluate.datasets.calibration_set`, kept apart from what `evaluate` scores), write
compressed-tensors, which vLLM's CPU backend serves with its int8 kernels. The catalog builds it
through `cache.build_atomically`, so a killed build never leaves a directory a server could load.

The fingerprint names everything the weights depend on: the smollm2 build, the scheme and layers kept
float, the calibration samples' content, and BUILD_VERSION (bump it when the quantizer's arithmetic
changes), so a stale build is rebuilt rather than served.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from workbench.embedded_models import smollm2
from workbench.embedded_models.catalog import EmbeddedModel, ModelRecipe

BUILD_VERSION = 1
# Dynamic (per-token) W8A8 on every decoder projection. Why not static here: (1) vLLM 0.32's CPU kernel
# for static int8 activations takes 0.9-1.7 s per 32x576x576 call on an AVX2 CPU (oneDNN; the dynamic
# path: ~20 ms), which no server can live with; (2) SmolLM2's down_proj inputs reach ~3200 on a few
# tokens (the median layer's input span is ~10), more than one per-tensor scale can hold: static W8A8
# needs those layers rolled back to float (`--keep-float '*.mlp.down_proj'`), per-token scales do not.
SCHEME = "w8a8-dynamic"
FORMAT = "compressed-tensors"
KEEP_FLOAT: tuple[str, ...] = ()
CALIBRATION_SAMPLES = 32  # recorded in the fingerprint; used only when SCHEME is static


def _calibration_digest() -> str:
    from workbench.evaluate.datasets import calibration_texts

    texts = calibration_texts(CALIBRATION_SAMPLES)
    return hashlib.sha256(json.dumps(texts, ensure_ascii=False).encode()).hexdigest()[:16]


def fingerprint() -> str:
    keep = ",".join(KEEP_FLOAT) or "none"
    calibration = f"{CALIBRATION_SAMPLES}:{_calibration_digest()}" if SCHEME == "w8a8-static" else "none"
    return f"smollm2-w8a8-v{BUILD_VERSION}-{SCHEME}-{FORMAT}-keep:{keep}-calib:{calibration}-of:{smollm2.fingerprint()}"


def build(out_dir: Path) -> dict[str, Any]:
    """Quantize the prepared smollm2 into `out_dir` (an empty staging directory); return provenance fields."""
    from ascend_backend.quantization import QuantFormat
    from workbench.quantize.checkpoint import build_into
    from workbench.quantize.request import QuantizeRequest, Scheme

    request = QuantizeRequest(
        model="smollm2",
        scheme=Scheme(SCHEME),
        format=QuantFormat(FORMAT),
        out=out_dir,
        num_samples=CALIBRATION_SAMPLES,
        keep_float=KEEP_FLOAT,
    )
    result = build_into(request, out_dir)
    return {
        "model": "smollm2-w8a8",
        "name": f"{smollm2.MODEL_NAME} W8A8",
        "architecture": "LlamaForCausalLM",
        "license": "Apache-2.0",
        "quantization": {
            "scheme": SCHEME,
            "format": FORMAT,
            "keep_float": list(KEEP_FLOAT),
            "calibration": result.calibration,
            "dtype": result.dtype,
        },
        "source": {"model": "smollm2", "fingerprint": smollm2.fingerprint()},
    }


SMOLLM2_W8A8 = ModelRecipe(
    EmbeddedModel.SMOLLM2_W8A8,
    "SmolLM2-135M-Instruct in W8A8 (int8 weights, per-token int8 activations; compressed-tensors), "
    "quantized by the workbench from smollm2 on first use",
    fingerprint,
    build,
)
