"""Where an error happened: process, device and rank, from the prefixes, the text and the file's name.

Each is read from the most direct statement a block makes (examples from public issue posts):

    pid      vLLM's '(Worker_TP0 pid=415)', plog's 'RUNTIME(129510,all__)', torch_npu's '(PID:8648, ...)',
             CANN's '[PID: 301341]', a plog file 'plog-129510_20260120094800123.log'
    device   torch_npu's 'Device:0' (when not -1), 'device_id=5', 'device(chipId:5, dieId:0)',
             'open device 4 failed', '(NPU 6; 60.97 GiB total capacity', a 'device-5/' log folder
    rank     torchrun's '[rank1]:', c10's '[Rank 1]', vLLM's 'rank=1' or 'TP7' in the process tag,
             torch_npu's 'RankID:1' (when not -1)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath

from workbench.triage.line_format import LineHead

_DEVICE = re.compile(
    r"\bDevice:(?P<a>\d+)|device_id=(?P<b>\d+)|device\(chipId:(?P<c>\d+)|open device (?P<d>\d+) failed"
    r"|\(NPU (?P<e>\d+); |deviceId=(?P<f>\d+)|device\((?P<g>\d+)\)"
)
_RANK = re.compile(r"\[Rank (?P<rank>\d+)\]")
# vLLM's process tag inside a line, where a paste lost its line breaks: '... (VllmWorkerProcess pid=270962) ...'.
_PID_TAG = re.compile(r"\([^()]*\bpid=(?P<pid>\d+)[^()]*\)")
_PLOG_FILE = re.compile(r"(?:plog|device)-(?P<pid>\d+)_\d+\.log$")
_DEVICE_DIR = re.compile(r"^device-(?P<device>\d+)$")


@dataclass(frozen=True)
class Place:
    pid: int | None = None
    device: int | None = None
    rank: int | None = None
    worker: str | None = None

    def describe(self) -> str:
        """'rank 1 (device 1, pid 7226, VllmWorker rank=1)', or 'pid 129510' with less known."""
        parts = [
            f"device {self.device}" if self.device is not None else None,
            f"pid {self.pid}" if self.pid is not None else None,
            self.worker,
        ]
        inner = ", ".join(p for p in parts if p)
        if self.rank is not None:
            return f"rank {self.rank}" + (f" ({inner})" if inner else "")
        return inner or "unknown process"


def _first_device(text: str) -> int | None:
    match = _DEVICE.search(text)
    if not match:
        return None
    return int(next(v for v in match.groups() if v is not None))


def path_place(path: PurePath | None) -> Place:
    """What a plog or device log's path says: 'device-3/device-129510_2026...log' -> device 3, pid 129510."""
    if path is None:
        return Place()
    file_match = _PLOG_FILE.search(path.name)
    dir_match = _DEVICE_DIR.match(path.parent.name)
    return Place(
        pid=int(file_match["pid"]) if file_match else None,
        device=int(dir_match["device"]) if dir_match else None,
    )


def block_place(heads: list[LineHead], text: str, from_path: Place) -> Place:
    """The place of a block: prefixes first, then the words of the text (a process tag inside a line), then
    the file's path."""
    pid = next((h.pid for h in heads if h.pid is not None), None)
    if pid is None:
        tag = _PID_TAG.search(text)
        pid = int(tag["pid"]) if tag else from_path.pid
    rank = next((h.rank for h in heads if h.rank is not None), None)
    if rank is None:
        match = _RANK.search(text)
        rank = int(match["rank"]) if match else None
    device = _first_device(text)
    return Place(
        pid=pid,
        device=device if device is not None else from_path.device,
        rank=rank,
        worker=next((h.worker for h in heads if h.worker), None),
    )
