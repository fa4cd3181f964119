#!/usr/bin/env bash
# Run the whole test suite, or the pytest arguments given (`make test-fast` passes its own).
#
# Without arguments (tests marked `long` excluded; `make test-long` runs them):
#   1. the unit tier, on two pytest-xdist workers;
#   2. two pytest sessions at once, each with its own share of the tiers that start real processes:
#        notebooks  the notebooks (papermill) and browser (headless Chromium) tiers, which share one
#                   headless run of every notebook, then the integration modules listed in NOTEBOOK_SIDE;
#        servers    the other integration modules (sharing one tiny-model server) and the npu tier.
#      A vLLM CPU server spends most of its ~75 s start in single-threaded imports (API server,
#      EngineCore, worker), so two sessions take two starts in about the time of one. Each session
#      keeps its module- and session-scoped servers whole (pytest-xdist's --dist loadgroup would be the
#      tool, but it does not group under pytest 9 here: measured, every group split across workers).
# Every session always runs; the exit code is non-zero when any fails (pytest exits 5 when it collects
# no tests, which fails the run rather than passing silently). Each line of output carries its session.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
# Inductor compiles in a pool of one subprocess per core by default. On two cores the pool's start-up
# competes with the other test worker and repays nothing for the small kernels compiled here: measured
# with a cold Inductor cache, a test process's first compile took 38 s with the pool and 20 s without,
# and the fused-decode test file 146 s -> 115 s. vLLM's own processes set the same value themselves.
export TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-1}
PYTEST=(.venv/bin/python -m pytest -p no:cacheprovider --timeout=900 --durations=25)
NOT_LONG=(-m "not long")  # long experiments: `make test-long`

if [ $# -gt 0 ]; then
    exec "${PYTEST[@]}" "$@"
fi

# Balanced by measured durations. Fresh clones, 3 Dec, with the engine pool and single-process TP=1 engines:
# 17.9 min in all (set-up 99 s, unit tier 192 s, then the notebooks session 778 s beside the servers session
# 644 s); before them (2 Dec) 47-49 min (set-up 268-298 s, unit tier 442-497 s, notebooks 1872-2007 s, servers
# 2032-2209 s). The suite is
# CPU-bound on two cores, so only less work shortens it: servers shared through the pool, and what the
# notebooks already do on real servers checked from their files (tests/notebooks/test_notebook_results.py).
# 6 Dec: notebooks 10 (the quantization autopilot) and 11 (twin runs) made the notebooks session the longer
# one, so the profiled sweep point moved to the servers side and test_regress became `long`.
NOTEBOOK_SIDE=()
SERVER_SIDE=()
for f in tests/integration/test_*.py; do
    [[ " ${NOTEBOOK_SIDE[*]} " == *" $f "* ]] || SERVER_SIDE+=("$f")
done

status=0
"${PYTEST[@]}" "${NOT_LONG[@]}" -n 2 tests/unit || status=$?

run_side() {  # name, pytest arguments...
    local name=$1
    shift
    "${PYTEST[@]}" "${NOT_LONG[@]}" "$@" 2>&1 | sed -u "s/^/[$name] /"
}
run_side notebooks tests/notebooks tests/browser ${NOTEBOOK_SIDE[@]+"${NOTEBOOK_SIDE[@]}"} &
notebooks_pid=$!
run_side servers "${SERVER_SIDE[@]}" tests/npu &
servers_pid=$!
wait $notebooks_pid || status=$?
wait $servers_pid || status=$?
exit $status
