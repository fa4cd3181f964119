"""What a node bundle says about the node's part in the cluster: its settings, its role, its instance.

A bundle holds the command line and the environment as they were; this module reads them the one way the
workbench reads serving commands (`workbench.lint.command`: exports, `VAR=x` prefixes, `vllm serve` or
`python -m vllm.entrypoints.openai.api_server` over continued lines) and names what the cluster rules ask
about: the data-parallel flags, the parallel sizes, the KV-transfer configuration, the ports the node will
bind. `ray start` lines are read here (lint knows only serving commands).

An *instance* is one serving engine spread over nodes: the nodes of one data-parallel group share the
master's `--data-parallel-address` and `--data-parallel-rpc-port`; a prefill and a decode instance are two
instances joined by a KV connector; nodes that name neither are an instance of their own.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from workbench.cluster.bundle import NodeBundle
from workbench.errors import WorkbenchError
from workbench.lint.command import ParsedInput, parse_text

# vLLM's defaults for the flags the rules read (vllm/engine/arg_utils.py and vllm/config/parallel.py, 0.25.1)
DEFAULT_API_PORT = 8000
DEFAULT_DP_RPC_PORT = 29550  # ParallelConfig.data_parallel_rpc_port


@dataclass(frozen=True)
class RayStart:
    """A `ray start` line: the head (`--head`) or a worker joining `--address`."""

    head: bool
    address: str | None
    node_ip: str | None
    port: int | None


def _ray_start(argv: tuple[str, ...]) -> RayStart | None:
    if "ray" not in [a.rsplit("/", 1)[-1] for a in argv] or "start" not in argv:
        return None
    values: dict[str, str | None] = {}
    for i, arg in enumerate(argv):
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            nxt = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("-") else None
            values[name] = value if eq else nxt
    port = values.get("--port")
    number = int(port) if port and port.isdigit() else None
    return RayStart("--head" in values, values.get("--address"), values.get("--node-ip-address"), number)


@dataclass(frozen=True)
class NodeView:
    """One bundle read as settings: `env` (the process environment, then the script's own exports) and `flags`
    (`--name` -> value as text, None for a bare flag; the last occurrence wins, as in argparse)."""

    bundle: NodeBundle
    env: Mapping[str, str] = field(default_factory=dict)
    flags: Mapping[str, str | None] = field(default_factory=dict)
    model: str | None = None
    serving: bool = False  # the bundle holds a vLLM serve command
    ray: RayStart | None = None

    @property
    def name(self) -> str:
        return self.bundle.node

    def flag(self, name: str) -> str | None:
        return self.flags.get(name)

    def int_flag(self, name: str, default: int | None = None) -> int | None:
        value = self.flags.get(name)
        try:
            return int(value) if value is not None else default
        except ValueError:
            raise WorkbenchError(f"node {self.name}: {name} {value!r} is not a whole number") from None

    @property
    def headless(self) -> bool:
        return "--headless" in self.flags

    @property
    def tp(self) -> int:
        return self.int_flag("--tensor-parallel-size", None) or self.int_flag("-tp", 1) or 1

    @property
    def pp(self) -> int:
        return self.int_flag("--pipeline-parallel-size", None) or self.int_flag("-pp", 1) or 1

    @property
    def dp_size(self) -> int:
        return self.int_flag("--data-parallel-size", None) or self.int_flag("-dp", 1) or 1

    @property
    def dp_local(self) -> int:
        return self.int_flag("--data-parallel-size-local", None) or self.dp_size

    @property
    def dp_start_rank(self) -> int:
        rank = self.int_flag("--data-parallel-start-rank", None)
        return rank if rank is not None else (self.int_flag("--data-parallel-rank", 0) or 0)

    @property
    def dp_address(self) -> str | None:
        return self.flag("--data-parallel-address")

    @property
    def dp_rpc_port(self) -> int:
        return self.int_flag("--data-parallel-rpc-port", DEFAULT_DP_RPC_PORT) or DEFAULT_DP_RPC_PORT

    @property
    def api_port(self) -> int | None:
        """The HTTP port this node binds (none for a headless follower or a node that does not serve)."""
        if not self.serving or self.headless:
            return None
        return self.int_flag("--port", DEFAULT_API_PORT)

    @cached_property
    def kv_transfer(self) -> dict[str, Any] | None:
        """The parsed `--kv-transfer-config` JSON, or None."""
        text = self.flag("--kv-transfer-config")
        if text is None:
            return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise WorkbenchError(
                f"node {self.name}: --kv-transfer-config is not JSON ({exc.msg}); fix its quoting"
            ) from None
        return value if isinstance(value, dict) else None

    @property
    def kv_role(self) -> str | None:
        return (self.kv_transfer or {}).get("kv_role")

    @property
    def instance(self) -> str:
        """Which serving instance the node belongs to (see the module docstring)."""
        if self.dp_address is not None and (self.dp_size > 1 or self.headless):
            return f"dp@{self.dp_address}:{self.dp_rpc_port}"
        if self.ray is not None and not self.ray.head and self.ray.address:
            return f"ray@{self.ray.address.split(':')[0]}"
        if self.ray is not None and self.ray.head:
            return f"ray@{self.ray.node_ip or self.env.get('VLLM_HOST_IP') or self.bundle.host}"
        return f"node:{self.name}"


def _settings(parsed: ParsedInput) -> tuple[dict[str, str], dict[str, str | None]]:
    env: dict[str, str] = {}
    flags: dict[str, str | None] = {}
    for occurrence in parsed.occurrences:
        if occurrence.kind == "env":
            env[occurrence.name] = str(occurrence.value)
        elif occurrence.kind == "flag":
            flags[occurrence.name] = None if occurrence.value is None else str(occurrence.value)
    return env, flags


# Entry points that are `vllm serve` under another name: the workbench's own (workbench.serving.vllm_serve)
# and vLLM's CLI module run with -m.
_SERVE_MODULES = {("-m", "workbench.serving.vllm_serve"): 2, ("-m", "vllm.entrypoints.cli.main", "serve"): 3}


def _as_vllm_serve(argv: tuple[str, ...]) -> tuple[str, ...]:
    """`python -m workbench.serving.vllm_serve --model M ...` -> `vllm serve --model M ...` (what lint reads)."""
    for i in range(len(argv)):
        for words, length in _SERVE_MODULES.items():
            if argv[i : i + length] == words:
                return ("vllm", "serve", *argv[i + length :])
    return argv


def view(bundle: NodeBundle) -> NodeView:
    """The bundle's settings: its script (exports and serve line as written) over its environment and command."""
    texts = [shlex.join(_as_vllm_serve(bundle.command))] if bundle.command else []
    if bundle.script:
        texts.append(bundle.script)
    env, flags, model, serving = dict(bundle.env), {}, None, False
    for text in texts:
        parsed = parse_text(text, where=f"node {bundle.node}")
        more_env, more_flags = _settings(parsed)
        env.update(more_env)
        flags.update(more_flags)
        model = parsed.model or model
        serving = serving or parsed.launcher is not None and bool(more_flags or parsed.model)
    ray = _ray_start(bundle.command) or _ray_from_script(bundle.script)
    env = {k: _expand(v, env) for k, v in env.items()}
    flags = {k: None if v is None else _expand(v, env) for k, v in flags.items()}
    return NodeView(bundle, env, flags, _expand(model, env) if model else model, serving, ray)


_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


def _expand(value: str, variables: Mapping[str, str]) -> str:
    """'$local_ip' -> the value the script assigned to local_ip (launch scripts set local_ip="..." first, then
    export HCCL_IF_IP=$local_ip); unknown names and positional $1 stay as written."""
    return _VARIABLE.sub(lambda m: variables.get(m.group(1), m.group(0)), value)


def _ray_from_script(script: str | None) -> RayStart | None:
    for line in (script or "").splitlines():
        if "ray" in line and " start" in line:
            try:
                found = _ray_start(tuple(shlex.split(line, comments=True)))
            except ValueError:
                continue
            if found is not None:
                return found
    return None


__all__ = ["DEFAULT_API_PORT", "DEFAULT_DP_RPC_PORT", "NodeView", "RayStart", "view"]
