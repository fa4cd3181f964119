"""Accuracy toolkit: msprobe-compatible tensor metrics, per-module dumps and dump comparison.

- `metrics.compare_tensors(test, reference)`: msprobe's compare columns and per-dtype verdict.
- `dump.capture_dump(model, inputs, out_dir)`: per-module outputs into a portable dump directory.
- `dump_compare.compare_dumps(test_dir, reference_dir)`: module-by-module metrics, first divergence,
  NaN origin; either side may be an msprobe dump.
"""
