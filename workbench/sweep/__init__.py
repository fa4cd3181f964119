"""Tuning sweeps with diagnosis (docs/METHOD.md §10–§11: measure before tuning; parameters pull on each other).

    from workbench import sweep
    spec = sweep.load_sweep_spec("cpu-tiny")                 # recipes/sweeps/cpu-tiny.yaml, validated
    outcome = sweep.run_sweep(spec, Path("runs/sweeps/cpu-tiny"))   # resumable; one server per config
    report = sweep.build_report(spec, outcome.results)       # Pareto, best under SLO, sensitivity, diagnosis
    sweep.write_html(report, Path("runs/sweeps/cpu-tiny/report.html"))

Modules: spec (YAML schema, expansion into points with stable ids), store (atomic JSONL results),
runner (serial / parallel / Ray execution, the store's one writer), measure (server, warm-up, load,
/metrics, placement per point), parallel (device groups of this machine), ray_executor (Ray tasks
over a cluster), interference (side by side, --confirm-best), server_metrics (Prometheus scrape), fingerprint
(environment), reaper (no orphaned server after a SIGKILL), analysis, diagnosis, charts (pure
table -> figure), report (tables + HTML), adaptive (auto_tune-style search), widgets (notebook panels).
"""
