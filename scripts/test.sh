#!/usr/bin/env bash
# Run the whole test suite: unit, integration (real vLLM CPU server), notebooks (papermill), and the
# npu-marked tests (skipped without an NPU). Extra arguments go to pytest.
# pytest exits 5 when it collects no tests; we let that fail the run rather than pass silently.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
exec .venv/bin/python -m pytest -p no:cacheprovider --timeout=900 --durations=15 "$@"
