"""Runs one untrusted program inside the limits; started by `workbench.evaluate.execution`, never imported.

    python -I -S -B sandbox_driver.py CONFIG_JSON

Standard library only (it runs with -I -S: no site-packages, no PYTHON* variables, no script directory on
sys.path). In this order, before a line of the program runs:

1. read the program (the file lies outside the sandbox directory, which the program may write in);
2. a network namespace of its own (`unshare(CLONE_NEWNET)`; as non-root inside a new user namespace):
   no interface but a loopback that is down, so no connection leaves the process;
3. resource limits: address space (RLIMIT_AS), CPU seconds (RLIMIT_CPU; SIGXCPU at the soft limit),
   file size (RLIMIT_FSIZE; CPython ignores SIGXFSZ, so a write past it fails with EFBIG), no new
   processes (RLIMIT_NPROC 0), a few open files, no core dumps;
4. as root, when nobody can read the interpreter's standard library: the sandbox directory handed to
   `nobody`, every group dropped and the uid and gid set to nobody's, so other users' files are
   read-only to the program (the verdict lists "uid 65534" when this applied);
5. an audit hook (PEP 578) that refuses new processes, signals, sockets, ctypes calls, resource changes,
   and any file write, delete, rename or permission change outside the sandbox directory. The refusal is
   an exception the program cannot catch with `except Exception`, and it is recorded even if the
   program catches it anyway, so the verdict is "blocked" either way.

The verdict is the last stdout line that starts with the run's marker: {"outcome", "reason", "isolation"}.
These layers contain accidents of generated code (loops, huge allocations, `rm -rf`, fork bombs); code
written to defeat them (e.g. to fake a verdict) needs a container or VM around the whole evaluation.
"""

import ctypes
import json
import os
import resource
import stat
import sys

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
NOBODY = 65534
DENIED_EVENTS = (
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "subprocess.Popen",
    "os.kill",
    "os.killpg",
    "os.setuid",
    "socket.connect",
    "socket.bind",
    "socket.sendto",
    "socket.sendmsg",
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "ctypes.dlopen",
    "ctypes.dlsym",
    "ctypes.call_function",
    "ctypes.cdata",
    "resource.setrlimit",
    "resource.prlimit",
    "sys.settrace",
    "sys.setprofile",
    "os.chroot",
)
PATH_EVENTS = {  # audit event -> positions of the path arguments it writes to
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.rename": (0, 1),
    "os.truncate": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.link": (0, 1),
    "os.symlink": (1,),
    "os.mkdir": (0,),
    "os.utime": (0,),
    "shutil.rmtree": (0,),
    "shutil.copyfile": (1,),
    "shutil.copytree": (1,),
    "shutil.move": (0, 1),
}
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class SandboxViolation(BaseException):
    """Raised by the audit hook; a BaseException so `except Exception` in the program does not hide it."""


def isolate_network(libc: ctypes.CDLL) -> str | None:
    for flags, label in ((CLONE_NEWNET, "netns"), (CLONE_NEWUSER | CLONE_NEWNET, "userns+netns")):
        if libc.unshare(flags) == 0:
            return label
    return None


def set_limits(config: dict) -> None:
    cpu = int(config["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (config["memory_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (config["file_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (config["open_files"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))  # fork/clone fail: the count is always >= 0


def others_can_read(directory: str) -> bool:
    """True when every directory from / to `directory` lets other users in, and `directory` lists for them."""
    path = os.path.realpath(directory)
    if not os.stat(path).st_mode & stat.S_IROTH:
        return False
    while True:
        if not os.stat(path).st_mode & stat.S_IXOTH:
            return False
        if path == os.path.dirname(path):
            return True
        path = os.path.dirname(path)


def drop_privileges(box: str) -> str | None:
    """As root: give the sandbox directory to nobody and become nobody (no groups).

    Only when nobody can read this interpreter's standard library (a Python installed under /root, as
    pyenv does, cannot be imported from as nobody); otherwise the uid stays and the other layers apply.
    """
    if os.geteuid() != 0 or not others_can_read(os.path.dirname(os.__file__)):
        return None
    os.chown(box, NOBODY, NOBODY)
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    return f"uid {NOBODY}"


def _inside(box: str, path: object) -> bool:
    if isinstance(path, int):  # an already open descriptor
        return True
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, (str, os.PathLike)):
        return False
    resolved = os.path.realpath(os.fspath(path))  # relative to the current directory, wherever the program went
    return resolved == box or resolved.startswith(box + os.sep)


def _writes(event: str, args: tuple) -> tuple[object, ...]:
    """The paths an event would modify (empty when it only reads)."""
    if event == "open":
        path, mode, flags = (tuple(args) + (None, None))[:3]
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & WRITE_FLAGS
        )
        return (path,) if writing else ()
    return tuple(args[i] for i in PATH_EVENTS.get(event, ()) if i < len(args))


def make_hook(box: str, violations: list[str]):
    busy = []  # re-entrancy guard: realpath() itself may raise events

    def hook(event: str, args: tuple) -> None:
        if busy:
            return
        busy.append(True)
        try:
            refused = event in DENIED_EVENTS or any(not _inside(box, p) for p in _writes(event, args))
            if refused:
                shown = ", ".join(repr(a)[:80] for a in args[:2])
                where = "" if event in DENIED_EVENTS else " outside the sandbox directory"
                violations.append(f"{event}({shown}){where}")
                raise SandboxViolation(f"blocked by the sandbox: {violations[-1]}")
        finally:
            busy.pop()

    return hook


def verdict(marker: str, outcome: str, reason: str, isolation: list[str]) -> None:
    line = json.dumps({"outcome": outcome, "reason": reason[:500], "isolation": isolation})
    os.write(1, f"\n{marker} {line}\n".encode())


def classify(exc: BaseException, violations: list[str]) -> tuple[str, str]:
    if violations:
        return "blocked", f"blocked by the sandbox: {violations[0]}"
    if isinstance(exc, MemoryError):
        return "memory_limit", "MemoryError: the address-space limit was reached"
    if isinstance(exc, OSError) and exc.errno == 27:  # EFBIG
        return "file_size_limit", f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SystemExit):
        return "failed", f"SystemExit({exc.code!r}) before the tests finished"
    text = str(exc).strip().splitlines()
    return "failed", f"{type(exc).__name__}: {text[0] if text else ''}".strip().rstrip(":")


def main() -> None:
    config = json.loads(sys.argv[1])
    marker = os.environ.pop("WB_SANDBOX_MARKER", "")
    box = os.path.realpath(config["box"])
    with open(config["program"], encoding="utf-8") as handle:
        source = handle.read()
    network = isolate_network(ctypes.CDLL(None, use_errno=True))
    set_limits(config)
    user = drop_privileges(box)
    isolation = [layer for layer in (network, "rlimits", user) if layer]
    os.chdir(box)
    violations: list[str] = []
    sys.addaudithook(make_hook(box, violations))
    isolation.append("audit hook")
    try:
        code = compile(source, "completion.py", "exec")
        exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
    except BaseException as exc:  # noqa: BLE001 - every way the program can end is a verdict
        verdict(marker, *classify(exc, violations), isolation)
        return
    if violations:
        verdict(marker, "blocked", f"blocked by the sandbox: {violations[0]}", isolation)
    else:
        verdict(marker, "passed", "", isolation)


if __name__ == "__main__":
    main()
