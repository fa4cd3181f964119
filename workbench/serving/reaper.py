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

The token is not always readable: vLLM renames its processes (`setproctitle`, "VLLM::EngineCore"), which
overwrites the environment block /proc/PID/environ shows. So the watcher also stops every member of a
process group whose leader carries the token (each server's API server leads its own group, and its
EngineCore stays in it); it notes those groups at its first look, while the leaders are still alive, so an
EngineCore whose API server died first is still found. Seen on a main job SIGKILLed during a start: the
API server stopped, its renamed EngineCore lived on.

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

groups = set()  # process groups led by a guarded process: a server's API server leads its own


def marked():
    # guarded processes, and every member of a group a guarded process led when first seen
    found, group_of = [], {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            raw = open(f"/proc/{name}/stat").read()
            fields = raw[raw.rindex(")") + 2:].split()
            if fields[0] == "Z":
                continue
            group_of[int(name)] = int(fields[2])
            if needle in open(f"/proc/{name}/environ", "rb").read().split(b"\0"):
                found.append(int(name))
        except (OSError, ValueError, IndexError):
            continue
    groups.update(pid for pid in found if group_of.get(pid) == pid)
    members = {pid for pid, group in group_of.items() if group in groups}
    return sorted((set(found) | members) - {os.getpid()})

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
