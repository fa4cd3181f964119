"""Findings ranked by where they run (issue 48): the engine container's files first, then what ships with
it, then build, CI, tests and locks; and every file the scan did not read is named."""

from __future__ import annotations

from tests.conftest import FIXTURES
from workbench.scan.file_kinds import FileKind
from workbench.scan.placement import Tier, tier_of
from workbench.scan.runner import ScanOptions, scan

CHART = FIXTURES / "deploy" / "production-stack"


def test_tiers_by_place_and_content():
    assert tier_of("helm/tests/deployment-vllm-multi_test.yaml", FileKind.CONFIG, "nvidia.com/gpu: 1") is Tier.TESTS
    assert tier_of("uv.lock", FileKind.REQUIREMENTS, "name = 'nvidia-nccl-cu12'") is Tier.LOCKS
    assert tier_of(".github/workflows/ci.yml", FileKind.CONFIG, "runs-on: gpu") is Tier.CI
    assert (
        tier_of("deploy/k8s.yaml", FileKind.CONFIG, "command: [vllm, serve]\nargs: [--max-model-len, '8192']")
        is Tier.ENGINE
    )
    assert tier_of("run.sh", FileKind.SHELL, "python3 -m vllm.entrypoints.openai.api_server --model m") is Tier.ENGINE
    assert tier_of("Dockerfile", FileKind.DOCKERFILE, "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04") is Tier.BUILD
    assert tier_of("router/app.py", FileKind.PYTHON, "import torch") is Tier.SHIPS_WITH


def test_the_chart_ranks_the_engine_before_its_unit_tests():
    report = scan([CHART], ScanOptions(jobs=1))
    tiers = [f.tier for f in report.findings]
    assert tiers[0] == "engine" and tiers.index("tests") > max(i for i, t in enumerate(tiers) if t == "engine")
    engine = {(f.file.split("production-stack/")[1], f.line, f.rule) for f in report.findings if f.tier == "engine"}
    assert ("helm/values.yaml", 43, "k8s.runtime_class") in engine  # runtimeClassName: "nvidia"
    assert ("helm/values.yaml", 45, "kv_cache.cuda_image") in engine  # lmcache/vllm-openai
    assert ("helm/values.yaml", 67, "k8s.gpu_sharing") in engine  # nvidia.com/mig-4g.71gb
    helpers = {(f.line, f.rule) for f in report.findings if f.file.endswith("_helpers.tpl")}
    assert (177, "k8s.gpu_sharing") in helpers  # a .tpl is read: HAMi's nvidia.com/gpumem
    assert [row["tier"] for row in report.tier_counts()] == ["engine", "ships_with", "tests"]


def test_files_not_read_are_named():
    report = scan([CHART], ScanOptions(jobs=1))
    named = dict(report.not_scanned)
    assert named[str(CHART / "helm" / "Chart.lock")] == "not a kind the scan reads"
    assert report.summary()["not_scanned"][0]["reason"]
