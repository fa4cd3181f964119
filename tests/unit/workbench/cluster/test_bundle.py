"""Node bundles: collected on this machine, from copied files, round-tripped, refused when not a bundle."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.conftest import FIXTURES
from workbench.cluster.api import CollectRequest, run_collect
from workbench.cluster.bundle import NodeBundle, kept_env, read_bundle
from workbench.cluster.collect import collect_here
from workbench.cluster.node import view
from workbench.errors import WorkbenchError

HCCN = FIXTURES / "cluster" / "hccn"


def test_collect_here_with_a_launch_script(tmp_path):
    import os
    import socket

    script = tmp_path / "launch.sh"
    script.write_text("export HCCL_BUFFSIZE=200\nvllm serve /m --port 8123 --data-parallel-size 2\n")
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        result = run_collect(CollectRequest(out=tmp_path / "n0.json", node="n0", script=script))
        port = listening.getsockname()[1]
    bundle = read_bundle(result.paths[0])
    assert bundle.node == "n0" and bundle.source == "collected"
    assert bundle.stack["python"] and bundle.interfaces and "lo" in bundle.interfaces
    assert any(p.port == port and p.pid == os.getpid() for p in bundle.ports or ())
    settings = view(bundle)
    assert settings.env["HCCL_BUFFSIZE"] == "200" and settings.dp_size == 2 and settings.api_port == 8123


def test_collect_from_copied_files(tmp_path):
    (tmp_path / "hccn").mkdir()
    (tmp_path / "hccn" / "3.ip.txt").write_text((HCCN / "ip-arthurchiao.txt").read_text())
    (tmp_path / "hccn" / "3.lldp.txt").write_text((HCCN / "lldp-arthurchiao.txt").read_text())
    (tmp_path / "hccn" / "3.bogus.txt").write_text("ignored")
    (tmp_path / "hccn.conf").write_text((HCCN / "hccn-arthurchiao.conf").read_text())
    (tmp_path / "env.txt").write_text("HCCL_IF_IP=10.0.0.1\nSECRET_TOKEN=x\nPATH=/bin\n")
    (tmp_path / "launch.sh").write_text("vllm serve /m --headless\n")
    bundle = run_collect(CollectRequest(out=tmp_path / "b.json", node="n3", from_files=tmp_path)).bundles[0]
    assert set(bundle.hccn["3"]) == {"ip", "lldp"}
    assert bundle.env == {"HCCL_IF_IP": "10.0.0.1"}  # the secret and PATH are not kept
    assert view(bundle).headless and bundle.source == "files"


def test_kept_env_leaves_secrets_out():
    assert kept_env({"VLLM_API_KEY": "k", "HCCL_BUFFSIZE": "1", "HOME": "/root"}) == {"HCCL_BUFFSIZE": "1"}


def test_round_trip_and_kind(tmp_path):
    bundle = collect_here("x", script="vllm serve /m\n")
    path = bundle.write(tmp_path / "x.json", {})
    assert read_bundle(path) == bundle
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"kind": "twin", "schema_version": 1}))
    with pytest.raises(WorkbenchError, match="not a 'node-bundle' one"):
        read_bundle(other)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"from_files": "d", "ray": "auto"}, "give one source"),
        ({"from_files": "d"}, "--node NAME"),
        ({"script": "/no/such.sh"}, "no such file"),
    ],
)
def test_requests_name_the_flag(tmp_path, kwargs, match):
    with pytest.raises(WorkbenchError, match=match):
        CollectRequest(out=tmp_path / "b.json", **kwargs)


def test_a_ray_start_line_is_its_own_instance():
    head = NodeBundle("h", script="ray start --head --port=6379 --node-ip-address=10.0.0.1\n")
    worker = NodeBundle("w", script="ray start --address=10.0.0.1:6379\n")
    assert view(head).instance == view(worker).instance == "ray@10.0.0.1"
    assert dataclasses.replace(head, script=None).node == "h"


def test_collect_reads_a_running_process_command_and_environment(monkeypatch):
    import os
    import subprocess
    import sys

    env = {**os.environ, "HCCL_BUFFSIZE": "321", "HF_TOKEN": "secret"}
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "--port", "8111"], env=env)
    try:
        bundle = collect_here("p", pid=child.pid)
    finally:
        child.kill()
        child.wait()
    assert bundle.command[-2:] == ("--port", "8111") and child.pid in bundle.own_pids
    assert bundle.env["HCCL_BUFFSIZE"] == "321" and "HF_TOKEN" not in bundle.env


def test_an_unknown_pid_names_the_flag():
    with pytest.raises(WorkbenchError, match="--pid 999999"):
        collect_here("p", pid=999_999)
