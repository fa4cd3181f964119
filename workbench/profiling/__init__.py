"""Profiling: where the time goes (docs/METHOD.md §12, §13).

    read_profile(path)              any torch_npu / msprof / msprof-analyze / torch.profiler output -> Profile
    capture.capture(recipe, out)    a real capture on the recipe's vLLM server (profiler window, fixed load)
    verdicts.judge(profile)         host-bound / communication-bound / slow rank / bubbles, with evidence and fix
    graph_mode.measure(recipe)      eager against compiled on fixed and mixed lengths
    charts                          pure functions: profile tables -> plotly figures

A `Profile` splits every rank's steps the way msprof-analyze's cluster analysis does (Computing,
Communication(Not Overlapped), Overlapped, Free) and lists ops by self time and kind of work; on CPU the
"device" is the worker's compute (`profile.CPU_MAPPING`).
"""
