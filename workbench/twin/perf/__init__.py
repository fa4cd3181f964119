"""The performance twin (docs/METHOD.md §19): the same load on two sides, and where B's extra time went.

`request` (what to run), `windows` (one measured and profiled window on a side's server, saved as it
ends), `stats` (intervals from repeated windows), `attribution` (ΔTTFT and ΔTPOT per request class, split
into buckets that add up), `kernels` (per kernel and per module: new, gone, slower), `result` (the
`perf-twin` document), `run` (the whole run, resumable). `workbench.twin.api.run_perf_twin` is the entry.
"""
