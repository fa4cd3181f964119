from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import FIXTURES

DEPLOY = FIXTURES / "deploy"
SERVICES = {
    "lws-vllm": ("lws.yaml",),
    "production-stack": ("rendered.yaml",),
    "worker-vllm": (".",),
    "genaicomps-vllm": ("compose.yaml",),
}


def service_paths(name: str) -> tuple[Path, ...]:
    return tuple(DEPLOY / name / p if p != "." else DEPLOY / name for p in SERVICES[name])


def expected(name: str) -> dict:
    return yaml.safe_load((DEPLOY / name / "expected.yaml").read_text(encoding="utf-8"))


@pytest.fixture(params=sorted(SERVICES))
def service(request) -> str:
    return request.param
