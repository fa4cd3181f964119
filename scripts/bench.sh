#!/usr/bin/env bash
# Run every benchmark in benchmarks/ (or those named as arguments); each prints its own ratios
# against a baseline measured in the same run. Output is also kept in benchmarks/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p benchmarks/results
if [ $# -gt 0 ]; then benches=("$@"); else benches=(benchmarks/bench_*.py); fi
status=0
for bench in "${benches[@]}"; do
  name=$(basename "$bench" .py)
  echo "=== $name"
  .venv/bin/python "$bench" 2>&1 | tee "benchmarks/results/$name.txt" || status=1
done
exit $status
