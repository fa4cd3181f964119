"""Profiling: where the time goes (docs/METHOD.md §12, §13).

    read_profile(path)              any torch_npu / msprof / msprof-analyze / torch.profiler output -> Profile
    capture.capture(recipe, out)    a real capture on the recipe's vLLM server (profiler window, fixed load)
    verdicts.judge(profile)         host-bound / communication-bound / slow rank / bubbles, with evidence and fix
    graph_mode.measure(recipe)      eager against compiled on fixed and mixed lengths
    buckets.step_buckets(profile)   a decode step's time in buckets that add up (the performance twin's unit)
    kernel_verdicts.judge_kernels   hot kernels judged from Ascend's pipeline counters (msprof-analyze's rules)
    idle_causes                     why the device idled: host dispatch, launch, synchronisation, not scheduling
    layers.module_of(kernel)        the vLLM module that launches a kernel (how two stacks' kernels meet)
    charts                          pure functions: profile tables -> plotly figures

A `Profile` splits every rank's steps the way msprof-analyze's cluster analysis does (Computing,
Communication(Not Overlapped), Overlapped, Free) and lists ops by self time and kind of work; on CPU the
"device" is the worker's compute (`profile.CPU_MAPPING`).
"""
