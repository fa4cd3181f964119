"""`npu-smi info`: run it and parse its table (the pre-flight judges it: `workbench.check.npu_smi`).

The table is fixed-width text whose columns vary by card family (samples in tests/fixtures/check/):

    | NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
    | Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
    +===========================+===============+====================================================+
    | 0     910B4               | OK            | 87.2        33                0    / 0             |
    | 0                         | 0000:C1:00.0  | 0           0    / 0          3339 / 65536         |

Each chip is two lines between separators. 310-series cards have no HBM column (their memory is the
"Memory-Usage" pair) and a `Device` id after the chip; A3 boards (Ascend910, 910C1) show a `Phy-ID` and
two chips per NPU, and newer drivers (26.0) widen the columns; first-generation 910 cards (910PremiumA,
910ProB) report both a DDR "Memory-Usage" pool and HBM; the process table that follows has one line per
process or "No running processes found in NPU n". Tables pasted into bug reports often end without their
closing separator: a chip's two lines at the end still count.
Parsing goes by `|` cells and `a / b` pairs, never by character columns, so padding and trailing
spaces do not matter.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

from workbench.stack.context import MachineContext
from workbench.stack.infofiles import parse_key_values


@dataclass(frozen=True)
class NpuChip:
    npu_id: int
    chip_id: int
    name: str
    health: str
    power_w: float | None  # None where npu-smi prints NA or '-'
    temp_c: int | None
    bus_id: str
    aicore_pct: int | None
    memory_used_mb: int  # the DDR "Memory-Usage" pair (the device memory on 310-series cards)
    memory_total_mb: int
    hbm_used_mb: int | None  # None on cards without HBM
    hbm_total_mb: int | None

    @property
    def device_used_mb(self) -> int:
        """Memory a model would compete for: HBM where the card has it, else the Memory-Usage pair."""
        return self.hbm_used_mb if self.hbm_total_mb else self.memory_used_mb

    @property
    def device_total_mb(self) -> int:
        return self.hbm_total_mb if self.hbm_total_mb else self.memory_total_mb


@dataclass(frozen=True)
class NpuProcess:
    npu_id: int
    chip_id: int
    pid: int
    name: str
    memory_mb: int


@dataclass(frozen=True)
class NpuSmiTable:
    smi_version: str
    driver_version: str  # the header's "Version:" is the loaded driver's version
    chips: tuple[NpuChip, ...]
    processes: tuple[NpuProcess, ...]

    @property
    def npu_ids(self) -> tuple[int, ...]:
        return tuple(sorted({c.npu_id for c in self.chips}))


class NpuSmiParseError(ValueError):
    """The text is not an `npu-smi info` table."""


_HEADER = re.compile(r"npu-smi\s+(\S+)\s+Version:\s*(\S+)")
_PAIR = re.compile(r"(\d+)\s*/\s*(\d+)")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _number(text: str, kind: type = float):
    try:
        return kind(text)
    except ValueError:
        return None  # NA, '-'


def _chip(first: str, second: str, has_hbm: bool) -> NpuChip:
    """Two table lines -> a chip. first: 'npu name | health | power temp pages'; second: 'chip [dev] | bus | aicore mem [hbm]'."""
    c1, c2 = _cells(first), _cells(second)
    if len(c1) < 3 or len(c2) < 3:
        raise NpuSmiParseError(f"unexpected chip lines: {first!r} / {second!r}")
    npu_id, name = c1[0].split(None, 1)
    metrics = c1[2].split()
    chip_id = int(c2[0].split()[0])
    aicore = c2[2].split()[0] if c2[2].split() else "NA"
    pairs = [(int(a), int(b)) for a, b in _PAIR.findall(c2[2])]
    if not pairs:
        raise NpuSmiParseError(f"no memory usage in {second!r}")
    hbm = pairs[1] if has_hbm and len(pairs) > 1 else (None, None)
    return NpuChip(
        npu_id=int(npu_id),
        chip_id=chip_id,
        name=name.strip(),
        health=c1[1],
        power_w=_number(metrics[0]) if metrics else None,
        temp_c=_number(metrics[1], int) if len(metrics) > 1 else None,
        bus_id=c2[1],
        aicore_pct=_number(aicore, int),
        memory_used_mb=pairs[0][0],
        memory_total_mb=pairs[0][1],
        hbm_used_mb=hbm[0],
        hbm_total_mb=hbm[1],
    )


def _process(line: str) -> NpuProcess | None:
    cells = _cells(line)
    if len(cells) < 4 or line.strip("| ").startswith("No running processes"):
        return None
    npu_id, chip_id = cells[0].split()[:2]
    return NpuProcess(int(npu_id), int(chip_id), int(cells[1]), cells[2], int(cells[3].split()[0]))


def parse_npu_smi_info(text: str) -> NpuSmiTable:
    """Parse the full `npu-smi info` output (chip table and process table)."""
    header = _HEADER.search(text)
    if not header:
        raise NpuSmiParseError("no 'npu-smi <version> Version: <driver>' header line")
    chips: list[NpuChip] = []
    processes: list[NpuProcess] = []
    section, has_hbm, pending = None, False, []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("+"):  # any separator closes a chip's pair of lines
            if section == "chips" and len(pending) == 2:
                chips.append(_chip(pending[0], pending[1], has_hbm))
            pending = []
            continue
        if not stripped.startswith("|"):
            continue
        if "Health" in stripped and "Name" in stripped:
            section = "chips"
            continue
        if "Process id" in stripped:
            section = "processes"
            continue
        if "Bus-Id" in stripped and "AICore" in stripped:
            has_hbm = "HBM-Usage" in stripped
            continue
        if section == "chips" and not _HEADER.search(stripped):
            pending.append(stripped)
        elif section == "processes":
            proc = _process(stripped)
            if proc:
                processes.append(proc)
    if section == "chips" and len(pending) == 2:  # a table pasted without its closing separator
        chips.append(_chip(pending[0], pending[1], has_hbm))
    return NpuSmiTable(header.group(1), header.group(2), tuple(chips), tuple(processes))


def parse_board(text: str) -> dict[str, str]:
    """`npu-smi info -t board -i N` key : value lines -> dict ('Firmware Version' -> '7.8.0.6.201')."""
    return parse_key_values(text)


@dataclass(frozen=True)
class NpuSmiReading:
    """Outcome of running npu-smi. Exactly one of `table` / `error` / `absent` describes it."""

    command: str | None
    table: NpuSmiTable | None = None
    board: dict[str, str] | None = None  # `-t board` of the first NPU, for the loaded firmware version
    error: str | None = None  # output tail of a failed run
    absent: str | None = None  # why npu-smi was not run


def _run(ctx: MachineContext, path: str, *args: str) -> tuple[int, str]:
    try:
        done = subprocess.run(
            [path, *args],
            capture_output=True,
            text=True,
            timeout=ctx.command_timeout_s,
            env=ctx.subprocess_env(),
        )
    except subprocess.TimeoutExpired:
        return 124, f"npu-smi {' '.join(args)} did not answer within {ctx.command_timeout_s:.0f} s"
    except OSError as exc:
        return 126, f"cannot run {path}: {exc}"
    return done.returncode, (done.stdout or "") + (done.stderr or "")


def read_npu_smi(ctx: MachineContext) -> NpuSmiReading:
    path = ctx.which(ctx.npu_smi)
    if path is None:
        return NpuSmiReading(None, absent=f"{ctx.npu_smi} not found on PATH")
    code, output = _run(ctx, path, "info")
    if code != 0 or ("dcmi" in output.lower() and "failed" in output.lower()):
        return NpuSmiReading(path, error=_tail(output) or f"exit code {code}")
    try:
        table = parse_npu_smi_info(output)
    except (NpuSmiParseError, ValueError) as exc:
        return NpuSmiReading(path, error=f"unreadable output ({exc}): {_tail(output)}")
    board = None
    if table.npu_ids:
        code, text = _run(ctx, path, "info", "-t", "board", "-i", str(table.npu_ids[0]))
        board = parse_board(text) if code == 0 else None
    return NpuSmiReading(path, table=table, board=board)


def _tail(text: str, lines: int = 6) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
