"""Gather a node bundle: on this node, from files a user copied off a node, or on every node of a Ray cluster.

    bundle = collect_here("node0")                       # this machine, its running vLLM serve found in /proc
    bundle = collect_from_files("node1", Path("n1/"))     # collect_env.txt, npu-smi.txt, hccn.conf, hccn/0.ip.txt, env.txt, launch.sh
    bundles = collect_over_ray("auto")                    # one Ray task per alive node, pinned to it

On a node, the bundle runs what vllm-ascend's multi-node check list runs by hand (`npu-smi info`,
`hccn_tool -i N -ip/-link/-net_health/-lldp/-netdetect/-gateway -g`, `cat /etc/hccn.conf`: installation.md at
v0.25.1rc1) under a short timeout each, and reads the serve or `ray start` process's own command line and
environment from /proc, its listening ports and the host's interfaces through psutil. Over Ray each task is an
ordinary Ray task scheduled onto one node (NodeAffinitySchedulingStrategy): no agent of ours is installed or
left behind, and the clock offset is the node's time against the midpoint of the call.
"""

from __future__ import annotations

import re
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

from workbench.cluster.bundle import ListeningPort, NodeBundle, kept_env
from workbench.cluster.hccn import HCCN_QUERIES
from workbench.errors import WorkbenchError
from workbench.stack.context import MachineContext
from workbench.stack.fingerprint import read_stack

TOOL_TIMEOUT_S = 5.0
HCCN_CONF = Path("/etc/hccn.conf")
# Processes whose command line is the node's part in the cluster: a vLLM server (headless or not) or Ray.
_SERVING = re.compile(
    r"vllm(\s|/\S*\s)serve\b|vllm\.entrypoints\.(openai\.api_server|cli\.main)|workbench\.serving\.vllm_serve|ray\s+start\b"
)


def _run(ctx: MachineContext, *argv: str) -> str | None:
    """The tool's output, or None when it is not installed; a failing tool's message is kept as its output."""
    path = ctx.which(argv[0])
    if path is None:
        return None
    try:
        done = subprocess.run(
            [path, *argv[1:]],
            capture_output=True,
            text=True,
            timeout=TOOL_TIMEOUT_S,
            env=ctx.subprocess_env(),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{argv[0]} failed: {exc}"
    return (done.stdout + done.stderr).strip()


def _devices(ctx: MachineContext) -> list[int]:
    """NPU ids from /dev/davinciN (the node's physical devices, which hccn_tool -i takes)."""
    try:
        names = [p.name for p in ctx.dev_dir.iterdir()]
    except OSError:
        return []
    return sorted(int(n[len("davinci") :]) for n in names if re.fullmatch(r"davinci\d+", n))


def hccn_outputs(ctx: MachineContext) -> dict[str, dict[str, str]]:
    """{device: {query: output}} for every device and query; empty without hccn_tool."""
    if ctx.which("hccn_tool") is None:
        return {}
    found: dict[str, dict[str, str]] = {}
    for device in _devices(ctx):
        outputs = {q: _run(ctx, "hccn_tool", "-i", str(device), f"-{q}", "-g") for q in HCCN_QUERIES}
        found[str(device)] = {q: text for q, text in outputs.items() if text is not None}
    return found


def serving_processes() -> list[psutil.Process]:
    """This machine's vLLM serve and `ray start` processes, parents only (their workers share the command)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "ppid"]):
        line = " ".join(proc.info.get("cmdline") or [])
        if _SERVING.search(line):
            found.append(proc)
    pids = {p.pid for p in found}
    return [p for p in found if p.info.get("ppid") not in pids]


def _process(pid: int | None, *, strict: bool = True) -> tuple[psutil.Process | None, str | None]:
    """The node's serving process and, when there is none to take, why (with `strict`, an error instead)."""
    if pid is not None:
        try:
            return psutil.Process(pid), None
        except psutil.Error:
            raise WorkbenchError(
                f"--pid {pid}: no such process on this node; `ps aux | grep vllm` shows the server"
            ) from None
    found = serving_processes()
    if len(found) > 1:
        listed = "; ".join(f"{p.pid}: {' '.join(p.info['cmdline'])[:80]}" for p in found)
        if strict:
            raise WorkbenchError(f"{len(found)} vLLM/Ray processes run here ({listed}); name the node's one with --pid")
        return None, f"{len(found)} vLLM/Ray processes run here, no command recorded ({listed})"
    return (found[0], None) if found else (None, "no vLLM serve or ray start process runs here")


def interfaces() -> dict[str, tuple[str, ...]]:
    """Host interfaces and their IPv4/IPv6 addresses (what GLOO_SOCKET_IFNAME and HCCL_IF_IP must name)."""
    wanted = (socket.AF_INET, socket.AF_INET6)
    return {
        name: tuple(a.address.split("%")[0] for a in addresses if a.family in wanted)
        for name, addresses in sorted(psutil.net_if_addrs().items())
    }


def listening_ports() -> tuple[ListeningPort, ...]:
    found = {(c.laddr.ip, c.laddr.port, c.pid) for c in psutil.net_connections("tcp") if c.status == psutil.CONN_LISTEN}
    return tuple(ListeningPort(ip, port, pid) for ip, port, pid in sorted(found, key=lambda x: (x[1], x[0])))


def _family(proc: psutil.Process) -> tuple[int, ...]:
    try:
        return (proc.pid, *(c.pid for c in proc.children(recursive=True)))
    except psutil.Error:
        return (proc.pid,)


def collect_here(
    node: str | None = None,
    *,
    pid: int | None = None,
    script: str | None = None,
    ctx: MachineContext | None = None,
    hccn_conf: Path = HCCN_CONF,
    strict: bool = True,
) -> NodeBundle:
    """This node's bundle; `pid` (else the one vLLM/Ray process found) gives the command and environment,
    `script` a launch script instead (its exports and serve line as written)."""
    ctx = ctx or MachineContext.from_environment(command_timeout_s=TOOL_TIMEOUT_S)
    proc, note = (None, None) if script is not None and pid is None else _process(pid, strict=strict)
    try:
        command = tuple(proc.cmdline()) if proc else ()
        environ: Mapping[str, str] = proc.environ() if proc else ctx.environ
    except psutil.Error as exc:
        raise WorkbenchError(
            f"cannot read process {proc.pid if proc else pid} ({exc}); run collect as its user or root"
        ) from None
    conf = hccn_conf.read_text(errors="replace") if hccn_conf.is_file() else None
    return NodeBundle(
        node=node or socket.gethostname(),
        hostname=socket.gethostname(),
        source="collected",
        stack=read_stack(ctx),
        npu_smi=_run(ctx, "npu-smi", "info"),
        hccn=hccn_outputs(ctx),
        hccn_conf=conf,
        env=kept_env(environ),
        command=command,
        script=script,
        interfaces=interfaces(),
        ports=listening_ports(),
        own_pids=_family(proc) if proc else (),
        notes=(note,) if note else (),
        collected_at=time.time(),
    )


def planned_bundle(node: str, argv: Sequence[str], environ: Mapping[str, str]) -> NodeBundle:
    """A node about to start on this machine (the loopback cluster): its command and environment as planned,
    this machine's stack, interfaces and listening ports."""
    from workbench.stack.fingerprint import stack

    return NodeBundle(
        node=node,
        hostname=socket.gethostname(),
        source="plan",
        stack=stack(),
        env=kept_env(environ),
        command=tuple(argv),
        interfaces=interfaces(),
        ports=listening_ports(),
        collected_at=time.time(),
    )


def _text(path: Path) -> str | None:
    return path.read_text(errors="replace") if path.is_file() else None


def collect_from_files(node: str, directory: Path) -> NodeBundle:
    """A bundle from files copied off a node (any may be missing; the check says what it could not judge):
    collect_env.txt, npu-smi.txt, hccn.conf, hccn/<device>.<query>.txt, env.txt (`env` output), launch.sh."""
    from workbench.triage.collect_env import parse_collect_env

    directory = Path(directory)
    if not directory.is_dir():
        raise WorkbenchError(
            f"{directory}: not a directory of node files (collect_env.txt, npu-smi.txt, hccn.conf, ...)"
        )
    collected = _text(directory / "collect_env.txt")
    env_text = _text(directory / "env.txt") or ""
    env = dict(line.split("=", 1) for line in env_text.splitlines() if "=" in line and not line.startswith("#"))
    hccn: dict[str, dict[str, str]] = {}
    for path in sorted((directory / "hccn").glob("*.txt")):
        device, _, query = path.stem.partition(".")
        if device.isdigit() and query in HCCN_QUERIES:
            hccn.setdefault(device, {})[query] = path.read_text(errors="replace")
    stack = parse_collect_env(collected).as_stack() if collected else {}
    return NodeBundle(
        node=node,
        hostname=node,
        source="files",
        stack=stack,
        collect_env=collected,
        npu_smi=_text(directory / "npu-smi.txt"),
        hccn=hccn,
        hccn_conf=_text(directory / "hccn.conf"),
        env=kept_env({**(parse_collect_env(collected).env if collected else {}), **env}),
        script=_text(directory / "launch.sh"),
    )


def _remote_collect(node: str | None, pid: int | None) -> dict[str, Any]:
    """Runs on a Ray node: its bundle (several servers on the node: none of their commands, said in the notes)."""
    return collect_here(node, pid=pid, strict=False).to_dict()


def _remote_clock() -> float:
    """Runs on a Ray node: its clock (a call of milliseconds, so the midpoint of the call is a fair reference)."""
    return time.time()


def collect_over_ray(address: str = "auto", *, timeout_s: float = 120.0) -> list[NodeBundle]:
    """One Ray task per alive node of the cluster at `address`, each pinned to its node; returns their bundles."""
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    except ImportError as exc:
        raise WorkbenchError(f"collecting over Ray needs ray ({exc}); install the 'cluster' extra") from None
    started = not ray.is_initialized()
    if started:
        try:
            ray.init(address=address, log_to_driver=False, include_dashboard=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise WorkbenchError(f"--ray {address}: no Ray cluster there ({exc}); start one with `ray start`") from None
    try:
        task, clock = ray.remote(num_cpus=0)(_remote_collect), ray.remote(num_cpus=0)(_remote_clock)
        pinned = [NodeAffinitySchedulingStrategy(n["NodeID"], soft=False) for n in ray.nodes() if n.get("Alive")]
        refs = [task.options(scheduling_strategy=s).remote(f"ray-node{i}", None) for i, s in enumerate(pinned)]
        bundles = []
        for strategy, data in zip(pinned, ray.get(refs, timeout=timeout_s), strict=True):
            began = time.time()
            remote = ray.get(clock.options(scheduling_strategy=strategy).remote(), timeout=timeout_s)
            offset = remote - (began + time.time()) / 2
            bundles.append(NodeBundle.from_dict({**data, "clock_offset_s": round(offset, 4)}))
        return bundles
    finally:
        if started:
            ray.shutdown()


__all__ = [
    "collect_from_files",
    "collect_here",
    "collect_over_ray",
    "hccn_outputs",
    "interfaces",
    "listening_ports",
    "serving_processes",
]
