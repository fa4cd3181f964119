"""Environment pre-flight: is this machine ready to serve vLLM on Ascend, and if not, what to change.

    from workbench.check import api as check
    report = check.run_checks(check.CheckContext.from_environment())
    check.styled_table(report)      # coloured table;  check.fixes_table(report) for what to do

One module per group of checks (versions, compat/matrix, cann, npu_smi, firmware, probe, shm,
buildtools, logging_env, serving); `runner` gathers the facts once and runs them; `report` renders.
"""
