"""Failure triage on Ascend logs: every CANN / torch_npu / HCCL error code named, explained and fixed.

    from workbench import triage
    report = triage.triage_paths(["server.log", "~/ascend/log/debug"])   # many logs at once
    print(triage.render_text(report))         # first failing rank and operator, cause, fix, verify step
    report.first.diagnosis.kind               # FailureKind.OPERATOR_EXECUTION, ...

The knowledge is data (`policy/triage/error_codes.yaml`, `knowledge`); the engine reads each log into error
blocks (`blocks`: codes, operators, frames, device/rank/pid, time), diagnoses each block against the
knowledge base (`diagnosis`) and orders the events of all files in time to name the first error
(`report`). `workbench.serving.crash.classify` uses the same engine for a failed server's log.
`collect_env` reads vllm-ascend's environment report back into the stack it describes.
"""
