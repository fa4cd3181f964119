"""Version lock and the regression gate (docs/METHOD.md §16): the stack written down, every change re-measured.

- `stackdiff`: the difference between two stack fingerprints (`workbench.stack.fingerprint`), each change
  with what it means.
- `lockfile`: `lock write` / `lock check` (the fingerprint plus pip constraints, compared with a machine).
- `results`: reads the result files the workbench writes (bench JSON, sweep results.jsonl, compare-ops /
  compare-dumps JSON) into runs grouped by workload.
- `store`: named baselines under the workbench data directory.
- `thresholds`, `compare`, `regress`, `report`: the noise-aware, metric-by-metric comparison behind
  `regress` and the text it prints.
- `measure`, `tables`, `charts`, `notebook`: repeated bench runs, tables, figures and notebook 09's calls.
"""
