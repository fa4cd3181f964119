"""The bottom layer: what this machine runs, and the stamp every result carries.

    context        MachineContext: the machine's inputs (environment snapshot, Ascend root, npu-smi, /dev)
    versions       installed Python distributions (torch, torch_npu, vllm, vllm-ascend, transformers)
    cann           the CANN toolkit, its kernels and NNAL/ATB, what it requires of the driver
    firmware       driver and firmware installed on disk
    npu_smi        `npu-smi info`: run and parsed
    presence       whether this is an Ascend machine at all
    shm            /dev/shm and the one size the workbench advises
    host           operating system, kernel, container
    model_hashes   content hashes of a model directory (cached by size and mtime)
    fingerprint    the stack fingerprint assembled from the readers above
    provenance     the stamp of one result: fingerprint, recipe, model, server
    devices, dtypes  device and dtype names as users write them -> torch objects

Readers only read: judging a reading is the pre-flight's job (`workbench.check`), comparing two
fingerprints the regression gate's. This package imports no domain package (tests/unit/workbench/test_layers.py),
and nothing here imports torch except `devices` and `dtypes`, which are imported only by name.
"""
