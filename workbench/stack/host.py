"""The host under the Python stack: operating system, kernel, and the container we run in, if any.

These belong in the stack fingerprint because each can move a benchmark without any package changing:
the NPU driver is a kernel module built for one kernel, and a container image pins the CANN, Python
and pip layers together (docs/METHOD.md §16: "lock the pip dependencies and the container image").

What a container can know about itself:
- podman writes `/run/.containerenv` with `image="..."` and `imageid="..."`: both are recorded;
- docker creates `/.dockerenv` but tells the container neither its image nor its digest, so the image
  comes from $ASCEND_WORKBENCH_IMAGE when the image or its entrypoint sets it (read in settings);
- Kubernetes, containerd and LXC show in `/proc/1/cgroup` (cgroup v1) paths.
Every reader takes its paths as arguments, so tests point it at fake files.
"""

from __future__ import annotations

import platform
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from workbench import settings
from workbench.stack.infofiles import read_key_values

_RUNTIME_IN_CGROUP = (("kubepods", "kubernetes"), ("docker", "docker"), ("containerd", "containerd"), ("lxc", "lxc"))
_CONTAINER_ID = re.compile(r"(?:docker[-/]|containers/|cri-containerd-)([0-9a-f]{64})")


@dataclass(frozen=True)
class Container:
    """The container this process runs in. `image` is a name or name@digest; None = not knowable here."""

    runtime: str
    id: str | None = None
    image: str | None = None
    image_id: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return asdict(self)


def os_name(os_release: Path = Path("/etc/os-release")) -> str:
    """'Debian GNU/Linux 12 (bookworm)' from os-release's PRETTY_NAME, else 'Linux' (platform.system())."""
    values = read_key_values(os_release) or {}
    return (
        values.get("PRETTY_NAME")
        or " ".join(filter(None, (values.get("NAME"), values.get("VERSION_ID"))))
        or (platform.system())
    )


def kernel_release() -> str:
    """The running kernel, as `uname -r` prints it."""
    return platform.release()


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _runtime_from_cgroup(cgroup_text: str) -> str | None:
    for needle, runtime in _RUNTIME_IN_CGROUP:
        if needle in cgroup_text:
            return runtime
    return None


def detect_container(root: Path = Path("/"), image: str | None = None) -> Container | None:
    """The container around this process, or None on a bare host.

    `root` is where /.dockerenv, /run/.containerenv and /proc live (a fake tree in tests); `image` is
    what the user declared ($ASCEND_WORKBENCH_IMAGE) and wins over what the runtime says.
    """
    containerenv = root / "run" / ".containerenv"
    cgroup = _read(root / "proc" / "1" / "cgroup")
    found_id = _CONTAINER_ID.search(cgroup + _read(root / "proc" / "self" / "mountinfo"))
    container_id = found_id.group(1) if found_id else None
    if containerenv.is_file():
        values = read_key_values(containerenv) or {}
        return Container(
            "podman", values.get("id") or container_id, image or values.get("image"), values.get("imageid") or None
        )
    runtime = "docker" if (root / ".dockerenv").exists() else _runtime_from_cgroup(cgroup)
    if runtime is None:
        return None
    return Container(runtime, container_id, image)


def container_record() -> dict[str, str | None] | None:
    """This machine's container as the fingerprint stores it (None on a bare host)."""
    found = detect_container(image=settings.container_image())
    return found.to_dict() if found else None
