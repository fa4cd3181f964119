"""The stack fingerprint read through the pre-flight's readers, on the pre-flight's fake Ascend trees."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.unit.workbench.check.fakes import board_with_firmware, build_ascend_tree, install_fake_npu_smi, make_ctx
from workbench.stack import cann, fingerprint, host, provenance
from workbench.stack.model_hashes import model_hashes

A2_8CARD = "npu_smi_info_910b4_8card_atlas800i_a2_healthy.txt"


def ascend_ctx(tmp_path: Path, *, table: str | None = A2_8CARD, board: str | None = None, **tree):
    root = build_ascend_tree(tmp_path / "Ascend", **tree).root
    bin_dir = tmp_path / "bin"
    if table is not None:
        install_fake_npu_smi(bin_dir, table, board)
    return make_ctx(tmp_path, {"PATH": f"{bin_dir}:/usr/bin:/bin"}, ascend_root=root, command_timeout_s=5.0)


def test_full_ascend_stack_from_fake_tree_and_npu_smi(tmp_path):
    ctx = ascend_ctx(tmp_path, board=board_with_firmware("7.7.0.1.231"))
    stack = fingerprint.read_stack(ctx)
    assert stack["cann"] == {"toolkit": "8.2.RC1", "kernels": "8.2.RC1", "nnal_atb": "8.2.RC1"}
    assert stack["driver"] == "25.0.rc1.1"  # the npu-smi header: the loaded driver
    assert stack["firmware"] == "7.7.0.1.231"  # `npu-smi info -t board`: the loaded firmware
    assert stack["chip"] == "910B4" and stack["card_count"] == 8
    assert stack["versions"]["torch"]  # this interpreter's torch, by distribution name
    assert set(stack) == {
        "python",
        "versions",
        "cann",
        "driver",
        "firmware",
        "chip",
        "card_count",
        "os",
        "kernel",
        "container",
        "cpu_model",
        "platform",
        "hostname",
    }


def test_loaded_driver_and_firmware_win_over_disk(tmp_path):
    # Disk says driver 25.0.rc1.1 / firmware 7.7.0.1.231; the running system still has 23.0.7 and the
    # board reports 7.8.0.6.201: the fingerprint records what runs (the pre-flight flags the reboot).
    ctx = ascend_ctx(
        tmp_path, table="npu_smi_info_910b2_8card_23.0.7_issue362.txt", board=board_with_firmware("7.8.0.6.201")
    )
    stack = fingerprint.read_stack(ctx)
    assert (stack["driver"], stack["firmware"]) == ("23.0.7", "7.8.0.6.201")
    assert stack["chip"] == "910B2" and stack["card_count"] == 8


def test_older_cann_layout_reads_kernels_from_version_cfg(tmp_path):
    ctx = ascend_ctx(tmp_path, cann="8.1.RC1", atb="nnal_atb_8.1.RC1_version.info", table=None)
    found = cann.find_cann(ctx)
    assert cann.kernels_version(found) == "8.1.RC1"  # opp_kernel_running_version=[7.7.0.1.238:8.1.RC1]
    stack = fingerprint.read_stack(ctx)
    assert stack["cann"] == {"toolkit": "8.1.RC1", "kernels": "8.1.RC1", "nnal_atb": "8.1.RC1"}
    # no npu-smi: the installed versions from disk, no chip
    assert (stack["driver"], stack["firmware"], stack["chip"], stack["card_count"]) == (
        "25.0.rc1.1",
        "7.7.0.1.231",
        None,
        None,
    )


def test_machine_without_ascend_has_nulls(tmp_path):
    ctx = make_ctx(tmp_path, {"PATH": "/usr/bin:/bin"})
    stack = fingerprint.read_stack(ctx)
    assert stack["cann"] == {"toolkit": None, "kernels": None, "nnal_atb": None}
    assert [stack[k] for k in ("driver", "firmware", "chip", "card_count")] == [None] * 4


def test_hanging_npu_smi_is_cut_short(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "npu-smi"
    smi.write_text("#!/bin/sh\nexec sleep 60\n")
    smi.chmod(0o755)
    root = build_ascend_tree(tmp_path / "Ascend").root
    ctx = make_ctx(tmp_path, {"PATH": f"{bin_dir}:/usr/bin:/bin"}, ascend_root=root, command_timeout_s=0.5)
    started = time.monotonic()
    stack = fingerprint.read_stack(ctx)
    assert time.monotonic() - started < 10
    assert stack["driver"] == "25.0.rc1.1" and stack["chip"] is None  # disk still answers


def test_stack_is_computed_once_per_process():
    assert fingerprint.stack() is fingerprint.stack()


def test_os_release_and_container_detection(tmp_path):
    release = tmp_path / "os-release"
    release.write_text('NAME="Ubuntu"\nVERSION_ID="22.04"\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\n')
    assert host.os_name(release) == "Ubuntu 22.04.4 LTS"
    assert host.os_name(tmp_path / "missing") == __import__("platform").system()

    bare = tmp_path / "bare"
    (bare / "proc" / "1").mkdir(parents=True)
    (bare / "proc" / "1" / "cgroup").write_text("0::/\n")
    assert host.detect_container(bare) is None

    podman = tmp_path / "podman"
    (podman / "run").mkdir(parents=True)
    (podman / "run" / ".containerenv").write_text(
        'engine="podman-4.9.3"\nname="svc"\nid="ab12"\nimage="quay.io/ascend/vllm-ascend:v0.9.1"\nimageid="9f3e"\n'
    )
    found = host.detect_container(podman)
    assert (found.runtime, found.id, found.image, found.image_id) == (
        "podman",
        "ab12",
        "quay.io/ascend/vllm-ascend:v0.9.1",
        "9f3e",
    )

    docker = tmp_path / "docker"
    (docker / "proc" / "1").mkdir(parents=True)
    cid = "3f" * 32
    (docker / "proc" / "1" / "cgroup").write_text(f"12:memory:/docker/{cid}\n")
    (docker / ".dockerenv").write_text("")
    found = host.detect_container(docker, image="registry/x@sha256:feed")
    assert (found.runtime, found.id, found.image) == ("docker", cid, "registry/x@sha256:feed")

    kube = tmp_path / "kube"
    (kube / "proc" / "1").mkdir(parents=True)
    (kube / "proc" / "1" / "cgroup").write_text("11:cpu:/kubepods/burstable/pod1/abc\n")
    assert host.detect_container(kube).runtime == "kubernetes"


def _model(directory: Path) -> Path:
    directory.mkdir()
    (directory / "config.json").write_text('{"hidden_size": 8}')
    (directory / "tokenizer.json").write_text('{"model": {}}')
    (directory / "model.safetensors").write_bytes(b"\x01" * 4096)
    (directory / "provenance.json").write_text('{"built": "today"}')  # our cache's build record: not content
    return directory


def test_model_hashes_split_config_tokenizer_weights(tmp_path):
    model = _model(tmp_path / "m")
    cache = tmp_path / "hashes.json"
    first = model_hashes(model, cache=cache)
    assert first.weight_files == 1 and first.weights_bytes == 4096
    (model / "provenance.json").write_text('{"built": "tomorrow"}')
    assert model_hashes(model, cache=cache) == first
    (model / "config.json").write_text('{"hidden_size": 16}')
    second = model_hashes(model, cache=cache)
    assert second.config_sha256 != first.config_sha256 and second.weights_sha256 == first.weights_sha256


def test_weights_are_not_reread_while_size_and_mtime_hold(tmp_path):
    model = _model(tmp_path / "m")
    weights = model / "model.safetensors"
    cache = tmp_path / "hashes.json"
    first = model_hashes(model, cache=cache).weights_sha256
    stat = weights.stat()
    weights.write_bytes(b"\x02" * 4096)  # same size; put the old mtime back: the cache answers
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert model_hashes(model, cache=cache).weights_sha256 == first
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # touched: hashed again
    assert model_hashes(model, cache=cache).weights_sha256 != first


def test_provenance_carries_model_and_recipe_hashes(tmp_path, monkeypatch):
    monkeypatch.setenv("ASCEND_WORKBENCH_CACHE", str(tmp_path / "cache"))
    model = _model(tmp_path / "m")
    record = provenance.provenance(model=str(model), device="cpu")
    assert record["model_hashes"]["path"] == str(model.resolve()) and record["device"] == "cpu"
    from workbench.recipes import load_serving_recipe

    recipe = load_serving_recipe("cpu-tiny").with_overrides(model=str(model))
    stamped = provenance.provenance(recipe=recipe)
    assert (
        stamped["recipe_hash"] and stamped["model_hashes"]["weights_sha256"] == record["model_hashes"]["weights_sha256"]
    )
    assert "model_hashes" not in provenance.provenance(model="Qwen/Qwen2.5-7B-Instruct")  # a hub id: nothing local
