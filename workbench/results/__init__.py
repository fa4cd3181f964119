"""The results layer: how the workbench keeps what it measured, durably and in one shape.

    files      one atomic write (temp file + rename), one exclusive lock, one staged directory
    jsonl      one append-only JSON-lines log with one damaged-line policy
    envelope   one result envelope: the payload and its provenance stamp under one key
    verdict    one verdict scale (pass / warning / error) every domain maps its outcomes onto

A measurement that took an hour must survive a Ctrl-C, a SIGKILL, a full disk or a half-written
line, and must say where it came from (docs/METHOD.md §16). Every domain (sweeps, bisect, evaluate,
profiling, regress, the notebook runner) writes through these modules, so there is one rule for each
of those guarantees instead of one per domain. This package imports no domain package (the layer test
in tests/unit/workbench/test_layers.py enforces it).
"""
