"""/dev/shm: vLLM's worker processes exchange tensors through shared memory.

Containers get 64 MB by default. Under concurrency the server then dies with a bare "Bus error" (a
process touched shared memory the kernel could not back) or exits with no message at all. Checked
before anything else (docs/METHOD.md §4, §14): under 1 GiB fails, under 8 GiB warns.

`RECOMMENDED_SHM_GIB` is the one size the workbench advises, here and in the crash classifier's fixes
(`workbench.serving.crash`), so the pre-flight and a crash report never disagree.
"""

from __future__ import annotations

from workbench.check.result import CheckResult, Group, failed, passed, warned
from workbench.stack.shm import GIB, RECOMMENDED_SHM_GIB, SHM_SIZE_FIX, ShmStats

G = Group.SHM
FAIL_BELOW = 1 * GIB
WARN_BELOW = RECOMMENDED_SHM_GIB * GIB

_WHY = "too small a /dev/shm kills vLLM under load with a bare 'Bus error' (or no message at all); "
_FIX = SHM_SIZE_FIX


def _gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB" if n < 10 * GIB else f"{n / GIB:.0f} GiB"


def check_shm(stats: ShmStats) -> CheckResult:
    name = "shm.size"
    expected = f">= {_gib(WARN_BELOW)} (fail under {_gib(FAIL_BELOW)})"
    if stats.total_bytes is None or stats.free_bytes is None:
        return failed(name, G, f"{stats.path} does not exist", expected, _WHY + _FIX)
    observed = f"{stats.path}: {_gib(stats.total_bytes)} total, {_gib(stats.free_bytes)} free"
    if stats.total_bytes < FAIL_BELOW:
        return failed(name, G, observed, expected, _WHY + _FIX)
    if stats.total_bytes < WARN_BELOW:
        return warned(name, G, observed, expected, _WHY + _FIX)
    if stats.free_bytes < FAIL_BELOW:
        return warned(
            name,
            G,
            observed + " (nearly full)",
            expected,
            f"remove stale files in {stats.path} (left by crashed servers) or enlarge it: {_FIX}",
        )
    return passed(name, G, observed, expected)
