"""Twin runs (docs/METHOD.md §17, §19): the same requests on two configurations; where the answers part, or the time.

`api` is the face the `twin` verb and notebooks 08 and 11 use: one typed request per use case (`TwinRequest`,
`PerfTwinRequest`). Modules: `sides` (the two typed sides), `collect` (greedy generations with logprobs, saved
as they come), `diverge` (the first diverging token of two generations, pure), `policy` (the verdict's
thresholds, `policy/twin/thresholds.yaml`), `report` (per-prompt table, summary and verdict), `run` (the token
stage, resumable), `locate` / `located` (dumps of both sides at the diverging step, compared module by module),
`perf/` (the performance twin), `charts`.
"""
