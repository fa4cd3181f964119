"""Where a scanned file runs, so the findings that matter for the port come first (docs/METHOD.md §1).

A port starts from the engine container: the files that start or configure vLLM's server (launch scripts,
Dockerfiles and manifests that run it, `vllm serve --config` files, `LLM(...)` code). Then what ships with
it (the service's code and configuration, the rest of the deployment), then what builds it, CI, tests and
lock files — where a CUDA tie is real but does not run on the NPU node. A chart's unit tests or a lock
file of a CPU-only component no longer bury the engine's own ties.
"""

from __future__ import annotations

import enum
import fnmatch
import re
from pathlib import PurePath

from workbench.scan.file_kinds import FileKind


class Tier(str, enum.Enum):
    ENGINE = "engine"  # starts or configures the vLLM server on the NPU node
    SHIPS_WITH = "ships_with"  # the service's code and configuration, the rest of the deployment
    BUILD = "build"  # build files, dependency declarations, images built without the engine
    CI = "ci"  # pipelines
    TESTS = "tests"  # tests, chart unit tests
    LOCKS = "locks"  # lock files

    @property
    def rank(self) -> int:
        return list(Tier).index(self)


_ENGINE = re.compile(
    r"vllm\s+serve\b|vllm\.entrypoints\.(?:openai\.)?api_server|vllm/vllm-openai|lmcache/vllm-openai"
    r"|\b(?:LLM|AsyncEngineArgs|EngineArgs)\(|--(?:max-model-len|tensor-parallel-size|gpu-memory-utilization)\b"
    r"|^\s*(?:max-model-len|gpu-memory-utilization|tensor-parallel-size)\s*:",
    re.M,
)
_LOCKS = (
    "*.lock",
    "uv.lock",
    "poetry.lock",
    "Pipfile.lock",
    "pdm.lock",
    "pylock*.toml",
    "package-lock.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "constraints*.txt",
    "requirements*.lock",
)
_CI_DIRS = {".github", ".gitlab", ".circleci", ".buildkite", ".ci", ".tekton"}
_CI_FILES = (".gitlab-ci.yml", "Jenkinsfile", "azure-pipelines*.yml", ".travis.yml", "cloudbuild*.yaml")
_TEST_DIRS = {"tests", "test", "testing", "e2e"}
_TEST_FILES = ("test_*.py", "*_test.py", "conftest.py", "*_test.yaml", "*_test.yml", "*.test.yaml")
_BUILD_KINDS = {FileKind.CMAKE, FileKind.MAKEFILE, FileKind.REQUIREMENTS}
_READS_ENGINE = {
    FileKind.SHELL,
    FileKind.DOCKERFILE,
    FileKind.CONFIG,
    FileKind.TEMPLATE,
    FileKind.PYTHON,
    FileKind.NOTEBOOK,
}


def tier_of(path: str, kind: FileKind, text: str | None) -> Tier:
    """The tier of one file: by its place in the tree first (locks, tests, CI), then by what it holds."""
    parts = PurePath(path).parts
    name = parts[-1] if parts else path
    if any(fnmatch.fnmatchcase(name, p) for p in _LOCKS):
        return Tier.LOCKS
    if _TEST_DIRS & set(parts[:-1]) or any(fnmatch.fnmatchcase(name, p) for p in _TEST_FILES):
        return Tier.TESTS
    if _CI_DIRS & set(parts[:-1]) or any(fnmatch.fnmatchcase(name, p) for p in _CI_FILES):
        return Tier.CI
    if kind in _READS_ENGINE and text is not None and _ENGINE.search(text):
        return Tier.ENGINE
    if kind in _BUILD_KINDS or kind is FileKind.DOCKERFILE or name == "setup.py":
        return Tier.BUILD
    return Tier.SHIPS_WITH
