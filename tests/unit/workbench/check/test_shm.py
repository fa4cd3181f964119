"""/dev/shm size thresholds (exact byte boundaries) and reading a real mount."""

from __future__ import annotations

from pathlib import Path

from workbench.check.result import Status
from workbench.check.shm import FAIL_BELOW, WARN_BELOW, check_shm
from workbench.stack.shm import GIB, ShmStats, read_shm

P = Path("/dev/shm")


def test_thresholds():
    assert check_shm(ShmStats(P, 64 * 2**20, 64 * 2**20)).status is Status.FAIL  # docker's 64 MB default
    assert check_shm(ShmStats(P, FAIL_BELOW - 1, FAIL_BELOW - 1)).status is Status.FAIL
    assert check_shm(ShmStats(P, FAIL_BELOW, FAIL_BELOW)).status is Status.WARN
    assert check_shm(ShmStats(P, WARN_BELOW - 1, WARN_BELOW - 1)).status is Status.WARN
    assert check_shm(ShmStats(P, WARN_BELOW, WARN_BELOW)).status is Status.PASS


def test_fix_explains_bus_error_and_shm_size():
    result = check_shm(ShmStats(P, 64 * 2**20, 64 * 2**20))
    assert "Bus error" in result.fix and "--shm-size 8g" in result.fix
    assert "0.06 GiB total" in result.observed


def test_full_shm_and_missing_path(tmp_path):
    assert check_shm(ShmStats(P, 16 * GIB, GIB // 2)).status is Status.WARN
    missing = read_shm(tmp_path / "no-such-mount")
    assert missing.total_bytes is None and check_shm(missing).status is Status.FAIL


def test_reads_a_real_filesystem(tmp_path):
    stats = read_shm(tmp_path)
    assert stats.total_bytes and stats.total_bytes >= stats.free_bytes >= 0
