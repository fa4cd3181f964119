"""The sample service shipped in tests/fixtures/scan_service (notebook 00's default target), scanned end
to end: every expected finding, at its line, and nothing else; the parallel scan finds the same."""

from __future__ import annotations

import collections
from pathlib import Path

from tests.conftest import FIXTURES
from workbench.scan import runner
from workbench.scan.findings import Severity
from workbench.scan.runner import ScanOptions, scan

SERVICE = FIXTURES / "scan_service"

EXPECTED = {
    "CMakeLists.txt": [(2, "native.cuda_build"), (3, "native.cuda_build"), (4, "native.cuda_build"), (5, "native.cuda_build"), (6, "native.cuda_build")],
    "Dockerfile": [(1, "docker.cuda_base"), (2, "env.nvidia_container"), (3, "env.nvidia_container"), (4, "env.cuda_alloc_conf"), (5, "env.cuda_toolkit"), (8, "lib.flash_attn"), (9, "tool.nvidia_smi"), (10, "vllm.kv_cache_fp8")],
    "csrc/fused_norm.cu": [(5, "native.cuda_source")],
    "csrc/ops.cpp": [(2, "native.cuda_api"), (9, "ext.cuda_dispatch")],
    "deploy/values.yaml": [(3, "docker.cuda_base"), (7, "k8s.gpu_resource"), (9, "env.cuda_visible_devices"), (11, "vllm.attention_backend"), (14, "vllm.quantization"), (15, "vllm.kv_cache_fp8"), (16, "device.cuda_string")],
    "docker-compose.yml": [(5, "docker.gpu_runtime"), (8, "env.cuda_visible_devices"), (13, "docker.gpu_runtime"), (15, "docker.gpu_runtime")],
    "environment.yml": [(5, "deps.nvidia_package"), (6, "deps.nvidia_package")],
    "requirements.txt": [(1, "deps.cuda_wheel"), (2, "deps.cuda_wheel"), (3, "deps.vllm_wheel"), (4, "lib.flash_attn"), (5, "lib.xformers"), (6, "lib.bitsandbytes"), (7, "deps.nvidia_package"), (8, "deps.nvidia_package"), (9, "lib.nvml"), (10, "lib.cupy"), (11, "lib.triton")],
    "scripts/build_image.sh": [(3, "docker.gpu_runtime")],
    "scripts/launch.sh": [(4, "env.cuda_visible_devices"), (5, "env.nccl"), (6, "env.cuda_toolkit"), (8, "tool.nvidia_smi"), (10, "vllm.attention_backend"), (10, "vllm.quantization")],
    "service/custom_ops.py": [(10, "ext.cuda_extension"), (13, "ext.cuda_dispatch"), (18, "ext.load_library")],
    "service/kernels/rms_norm_triton.py": [(4, "lib.triton"), (5, "lib.triton"), (8, "triton.kernel")],
    "service/model.py": [(10, "lib.flash_attn"), (14, "lib.apex"), (16, "device.cuda_string"), (17, "dtype.fp8"), (19, "backends.cudnn"), (20, "backends.tf32"), (32, "tensor.cuda_method"), (34, "backends.sdp"), (39, "torch_cuda.capability"), (40, "tensor.cuda_method"), (43, "torch_cuda.api"), (44, "device.cuda_string"), (50, "amp.cuda"), (52, "torch_cuda.api"), (53, "cuda_graph.capture"), (54, "cuda_graph.capture"), (56, "torch_cuda.nvtx"), (62, "unresolved.device"), (66, "device.string_compare")],
    "service/serve.py": [(11, "env.cuda_visible_devices"), (12, "vllm.attention_backend"), (13, "vllm.cuda_env"), (14, "env.nccl"), (18, "tool.nvidia_smi"), (22, "nccl.backend"), (26, "unresolved.backend"), (30, "unresolved.import"), (36, "vllm.quantization"), (37, "vllm.kv_cache_fp8"), (38, "vllm.cudagraph_option"), (46, "vllm.attention_backend"), (46, "vllm.quantization")],
    "setup.py": [(8, "deps.vllm_wheel"), (8, "lib.flash_attn"), (9, "ext.cuda_extension")],
}  # fmt: skip


def _by_file(report) -> dict[str, list[tuple[int | None, str]]]:
    found: dict[str, list[tuple[int | None, str]]] = collections.defaultdict(list)
    for f in report.findings:
        found[str(Path(f.file).relative_to(SERVICE))].append((f.line, f.rule))
    return dict(found)


def test_the_sample_service_has_exactly_the_expected_findings():
    report = scan([SERVICE], ScanOptions(jobs=1))
    assert _by_file(report) == EXPECTED
    assert report.problems == ()
    assert report.files_scanned == 17 and dict(report.skipped) == {"not a kind the scan reads": 1}  # README.md
    assert report.complete and report.jobs == 1


def test_findings_carry_their_mapping():
    report = scan([SERVICE], ScanOptions(jobs=1))
    [fa3] = [f for f in report.findings if f.file.endswith("model.py") and f.rule == "lib.flash_attn"]
    assert fa3.severity is Severity.BLOCKS and fa3.category.value == "libraries"
    assert fa3.excerpt == "from flash_attn import flash_attn_func"
    assert fa3.detail == "optional import (try/except)"
    assert fa3.verify == "ascend-workbench compare-ops --op prefill_attention; docs/METHOD.md §1, §15"
    assert "npu_fusion_attention" in fa3.counterpart


def test_summary_groups_by_category_severity_and_file():
    report = scan([SERVICE], ScanOptions(jobs=1))
    total = sum(len(v) for v in EXPECTED.values())
    assert sum(report.severity_counts().values()) == total
    assert sum(r["findings"] for r in report.category_counts()) == total
    files = {r["file"]: r for r in report.file_counts()}
    model = files[str(SERVICE / "service" / "model.py")]
    assert (model["findings"], model["blocks"], model["unknown"]) == (19, 2, 1)
    assert report.by_category()["findings"].sum() == total
    assert list(report.findings_by_file().index.names) == ["file", "line"]


def test_parallel_scan_finds_the_same(monkeypatch):
    monkeypatch.setattr(runner, "PARALLEL_FROM_FILES", 1)  # the sample is small; force the worker pool
    parallel = scan([SERVICE], ScanOptions(jobs=2))
    assert parallel.jobs == 2
    assert parallel.findings == scan([SERVICE], ScanOptions(jobs=1)).findings
