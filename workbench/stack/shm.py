"""/dev/shm on this machine, and the one size the workbench advises for it.

vLLM's worker processes exchange tensors through shared memory; containers get 64 MB by default, and
under concurrency a server then dies with a bare "Bus error" or no message at all (docs/METHOD.md §4).
`RECOMMENDED_SHM_GIB` and `SHM_SIZE_FIX` are the one statement of the advice: the pre-flight
(`workbench.check.shm`) and the crash classifier (`workbench.serving.crash`) both quote them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

GIB = 2**30
RECOMMENDED_SHM_GIB = 8  # docs/METHOD.md §4: start containers with --shm-size 8g (or --ipc=host)


# The fix, in one phrase every caller shares (the pre-flight check, the crash fixes).
SHM_SIZE_FIX = (
    f"start the container with --shm-size {RECOMMENDED_SHM_GIB}g (or --ipc=host; in Kubernetes mount an emptyDir "
    f"with medium: Memory at /dev/shm); on a host: mount -o remount,size={RECOMMENDED_SHM_GIB}G /dev/shm"
)


@dataclass(frozen=True)
class ShmStats:
    path: Path
    total_bytes: int | None  # None: the path does not exist
    free_bytes: int | None


def read_shm(path: Path) -> ShmStats:
    try:
        st = os.statvfs(path)
    except OSError:
        return ShmStats(path, None, None)
    return ShmStats(path, st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize)
