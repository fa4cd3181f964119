"""What kind of failure a log shows: one enum for the crash classifier and the error-code knowledge base.

`workbench.serving.crash.CrashKind` is this enum under its historical name, so a kind the knowledge base
(`policy/triage/error_codes.yaml`) names is a kind the classifier can report, and the other way round, with no
second list to keep in step. The first block is what the classifier knew before error codes; the second
block is what the codes of CANN, torch_npu and HCCL add (docs/METHOD.md §6 lists the order the method
checks them in: cards and driver, CANN's own errors, then /dev/shm and permissions).
"""

from __future__ import annotations

import enum


class FailureKind(str, enum.Enum):
    # -- signatures of the serving stack (workbench.serving.crash) --------------------------------------
    INJECTED_FAULT = "injected_fault"
    BLOCK_SIZE = "block_size"
    KV_MEMORY = "kv_memory"
    MODEL_NOT_FOUND = "model_not_found"
    CANN_NOT_SOURCED = "cann_not_sourced"
    VERSION_MISMATCH = "version_mismatch"
    PORT_IN_USE = "port_in_use"
    SHM = "shm"
    SEGFAULT = "segfault"
    OUT_OF_MEMORY = "out_of_memory"  # out of memory at a stage the log does not show
    UNSUPPORTED_OP = "unsupported_op"
    GRAPH_CAPTURE = "graph_capture"
    KILLED = "killed"
    SILENT_EXIT = "silent_exit"
    START_TIMEOUT = "start_timeout"
    FALSE_READY = "false_ready"
    HUNG = "hung"  # requests in flight, no progress on /metrics (workbench.serving.hang)
    UNKNOWN = "unknown"
    # -- families of CANN / torch_npu / HCCL error codes (policy/triage/error_codes.yaml) ----------------------
    DEVICE_INIT = "device_init"  # the card could not be opened or set (rtSetDevice, 107001, 507033)
    DEVICE_FAULT = "device_fault"  # the card or its driver failed underneath (heartbeat, ECC, link, DMA)
    CANN_INIT = "cann_init"  # ACL/GE could not initialise for this chip (500001, 500002, SoC version)
    OPERATOR_EXECUTION = "operator_execution"  # a kernel faulted while it ran (507015, 507035, EZ9999 aicore)
    AICORE_TIMEOUT = "aicore_timeout"  # a kernel did not finish in time (507014, 507034)
    OPERATOR_CHECK = "operator_check"  # an operator refused its inputs at parameter or tiling check
    KERNEL_MISSING = "kernel_missing"  # no compiled kernel for this op, chip and dtype (561003, EZ3002)
    RUNTIME_ARGUMENT = "runtime_argument"  # the runtime rejected a call's arguments (1070xx, EE1001)
    HCCL_TIMEOUT = "hccl_timeout"  # a collective waited past its timeout (EI0002, watchdog)
    HCCL_INIT = "hccl_init"  # a communicator or its links could not be set up (EI0009, EJ0001)
    OOM_WEIGHTS = "oom_weights"  # device memory ran out while the weights loaded
    OOM_KV_PROFILING = "oom_kv_profiling"  # ... while the KV cache was sized (determine_available_memory)
    OOM_GRAPH_CAPTURE = "oom_graph_capture"  # ... while graph mode captured its graphs
    # -- failures that carry no Ascend code (policy/triage/error_codes.yaml, signatures) -------------------
    LIBRARY_MISSING = "library_missing"  # a shared library of the stack cannot be opened (libatb.so, libascend_hal.so)
    PACKAGE_SHADOWED = "package_shadowed"  # a directory in the working directory hides an installed package
    BUILD_FAILURE = "build_failure"  # a source build failed (torch_npu headers, CANN headers, the compiler)
    COMPILER_POOL = "compiler_pool"  # CANN's operator compiler (TBE) or its subprocess pool failed
    UNSUPPORTED_FEATURE = "unsupported_feature"  # a model, architecture or feature the release does not serve
    CONFIG_REFUSED = "config_refused"  # vLLM or vllm-ascend refused a setting at start-up (what `lint` judges)
