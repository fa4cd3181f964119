"""The orphan guard: stops a server if the process that launched it dies without stopping it.

`workbench.serving.server` stops a server's whole process group on every path Python sees (exceptions,
Ctrl-C, a failed start, interpreter exit). A SIGKILL, an OOM kill, a killed notebook kernel or a closed
terminal are paths Python never sees: the server — possibly still in its minutes-long start — would
keep running, holding the port, memory and cores (on an NPU: device memory), and the next run would
compete with it.

So every server the workbench launches carries one more environment variable, `REAPER_VAR=<token>`
(environments are inherited, so the API server, EngineCore and workers all carry it, whatever
process group they end up in), and a tiny watcher process holds the read end of a pipe from the
launcher. A normal stop writes "done" and closes the pipe; if the pipe closes without "done" (the
launcher died: the kernel closes its descriptors), the watcher SIGTERMs every process carrying the
token, waits, then SIGKILLs what is left.

The watcher is `python -c` with the code below (no workbench import: it must start in milliseconds
and depend on nothing half-installed), in its own session so Ctrl-C in the launcher's terminal does not
reach it.
"""

from __future__ import annotations

import subprocess
import sys
import uuid

REAPER_VAR = "ASCEND_WORKBENCH_SERVER_GUARD"

_WATCHER = r"""
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
needle = sys.argv[1].encode()
if sys.stdin.read().strip() == "done":
    sys.exit(0)

def marked():
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if needle not in open(f"/proc/{name}/environ", "rb").read().split(b"\0"):
                continue
            raw = open(f"/proc/{name}/stat").read()
        except OSError:
            continue
        if raw[raw.rindex(")") + 2:].split()[0] != "Z":
            found.append(int(name))
    return found

for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
    left = marked()
    if not left:
        break
    for pid in left:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + grace
    while marked() and time.monotonic() < deadline:
        time.sleep(0.2)
"""


class OrphanReaper:
    """Stops every process launched with `env()` if this process dies before `release()`.

    reaper = OrphanReaper()
    launch servers with extra_env={**reaper.env(), ...}
    ...                      # a SIGKILL here: the watcher stops those servers
    stop the servers; reaper.release()
    """

    def __init__(self, token: str | None = None):
        self.token = token or uuid.uuid4().hex
        self._process = subprocess.Popen(
            [sys.executable, "-c", _WATCHER, f"{REAPER_VAR}={self.token}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self._process.pid

    def env(self) -> dict[str, str]:
        """The variable to add to every guarded server's environment."""
        return {REAPER_VAR: self.token}

    def release(self) -> None:
        """Everything guarded was stopped normally: the watcher exits without killing anything."""
        if self._process.stdin is not None and not self._process.stdin.closed:
            try:
                self._process.stdin.write(b"done\n")
                self._process.stdin.close()
            except BrokenPipeError:
                pass
        self._process.wait(timeout=10)
