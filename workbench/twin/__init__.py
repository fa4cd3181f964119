"""Twin runs (docs/METHOD.md §17): the same requests on two configurations, the first diverging token, the module.

`api` is the face the `twin` verb and notebook 11 use. Modules: `sides` (what runs on each side),
`collect` (greedy generations with logprobs, saved as they come), `diverge` (the first diverging token of
two generations, pure), `policy` (the verdict's thresholds, `policy/twin/thresholds.yaml`), `report`
(per-prompt table, summary and verdict), `locate` (dumps of both sides at the diverging step, gathered
and compared module by module), `run` (the whole run, resumable), `charts`.
"""
