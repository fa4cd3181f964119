"""Environment pre-flight: is this machine ready to serve vLLM on Ascend, and if not, what to change.

    from workbench import envcheck
    report = envcheck.run_checks(envcheck.CheckContext.from_environment())
    envcheck.styled_table(report)      # coloured table;  envcheck.fixes_table(report) for what to do

One module per group of checks (versions, compat/matrix, cann, npu_smi, firmware, probe, shm,
buildtools, logging_env, serving); `runner` gathers the facts once and runs them; `report` renders.
"""
