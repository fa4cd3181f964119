"""Per-process stats files: writing (periodic, at exit, after fork) and aggregation from outside."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from ascend_backend.registry import Backend, OpRegistry
from ascend_backend.vllm_plugin.stats import (
    StatsFileError,
    StatsFileWriter,
    format_counts,
    read_op_stats,
    stats_path,
)


def write(prefix, pid, stats):
    stats_path(prefix, pid).write_text(json.dumps({"pid": pid, "stats": stats}))


def test_reader_sums_processes_and_ignores_other_files(tmp_path):
    prefix = tmp_path / "run"
    write(prefix, 11, {"rms_norm": {"native": 3}, "silu_and_mul": {"native": 2}})
    write(prefix, 12, {"rms_norm": {"native": 5, "faulted": 1}})
    (tmp_path / "run.12.json.tmp12").write_text("half a fi")  # an in-flight atomic write
    (tmp_path / "other.13.json").write_text("{}")  # another prefix
    (tmp_path / "run.notapid.json").write_text("{}")
    stats = read_op_stats(prefix)
    assert [p.pid for p in stats.processes] == [11, 12]
    assert stats.totals == {"rms_norm": {"native": 8, "faulted": 1}, "silu_and_mul": {"native": 2}}
    assert stats.calls("rms_norm") == 8 and stats.faulted("rms_norm") == 1 and stats.calls("gelu") == 0
    frame = stats.to_frame()
    assert frame.loc[frame.pid == 12, ["op", "native", "faulted"]].values.tolist() == [["rms_norm", 5, 1]]


def test_reader_with_no_files_is_empty_and_a_foreign_file_is_named(tmp_path):
    assert read_op_stats(tmp_path / "none").processes == ()
    (tmp_path / "run.5.json").write_text('{"pid": 5}')
    with pytest.raises(StatsFileError, match=r"run\.5\.json.*ASCEND_BACKEND_STATS_FILE"):
        read_op_stats(tmp_path / "run")


def toy_registry() -> OpRegistry:
    reg = OpRegistry()
    reg.register("double", Backend.NATIVE)(lambda x: 2 * x)
    return reg


def test_writer_writes_only_on_change_and_periodically(tmp_path):
    import torch

    reg = toy_registry()
    writer = StatsFileWriter(tmp_path / "w", reg, interval_s=0.05)
    assert writer.write() is True and writer.write() is False  # nothing changed since
    reg.dispatch("double", "cpu", torch.ones(1))
    assert writer.write() is True
    assert read_op_stats(tmp_path / "w").totals == {"double": {"native": 1}}
    writer._start_thread()
    reg.dispatch("double", "cpu", torch.ones(1))
    deadline = time.monotonic() + 10
    while read_op_stats(tmp_path / "w").calls("double") != 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    writer.close()
    assert read_op_stats(tmp_path / "w").calls("double") == 2


def test_format_counts_is_one_readable_line():
    assert format_counts({"rms_norm": {"native": 3, "faulted": 1}, "gelu": {"npu": 2}}) == (
        "gelu npu=2; rms_norm faulted=1 native=3"
    )
    assert format_counts({}) == "none"


def _child_calls_twice() -> None:
    import torch

    from ascend_backend.registry import REGISTRY

    REGISTRY.dispatch("silu_and_mul", "cpu", torch.ones(2, 4))
    REGISTRY.dispatch("silu_and_mul", "cpu", torch.ones(2, 4))


def test_forked_multiprocessing_child_writes_its_own_file_at_exit(tmp_path):
    # Run in a fresh interpreter so the writer's fork hooks do not stay in the pytest process.
    script = f"""
import multiprocessing, torch
import ascend_backend
from ascend_backend.registry import REGISTRY
from ascend_backend.vllm_plugin.stats import StatsFileWriter
from tests.unit.ascend_backend.vllm_plugin.test_stats import _child_calls_twice
writer = StatsFileWriter({str(tmp_path / "fork")!r}, interval_s=60).start()  # no periodic write in time
REGISTRY.dispatch("silu_and_mul", "cpu", torch.ones(2, 4))  # the parent's own call
child = multiprocessing.get_context("fork").Process(target=_child_calls_twice)
child.start(); child.join()
print(child.pid)
"""
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    child_pid = int(out.stdout.split()[-1])
    stats = read_op_stats(tmp_path / "fork")
    by_pid = {p.pid: p.stats for p in stats.processes}
    assert by_pid[child_pid] == {"silu_and_mul": {"native": 2}}  # the parent's call is not counted again
    assert stats.calls("silu_and_mul") == 3 and len(by_pid) == 2
