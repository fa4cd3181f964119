"""`npu-smi info`: run it, parse its table, and judge cards, health and device memory in use.

The table is fixed-width text whose columns vary by card family (samples in tests/fixtures/envcheck/):

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

from workbench.envcheck.context import CheckContext
from workbench.envcheck.infofiles import parse_key_values
from workbench.envcheck.presence import NpuPresence
from workbench.envcheck.result import CheckResult, Group, failed, passed, skipped, warned

G = Group.NPU_SMI


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


# -- running npu-smi ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class NpuSmiReading:
    """Outcome of running npu-smi. Exactly one of `table` / `error` / `absent` describes it."""

    command: str | None
    table: NpuSmiTable | None = None
    board: dict[str, str] | None = None  # `-t board` of the first NPU, for the loaded firmware version
    error: str | None = None  # output tail of a failed run
    absent: str | None = None  # why npu-smi was not run


def _run(ctx: CheckContext, path: str, *args: str) -> tuple[int, str]:
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


def read_npu_smi(ctx: CheckContext) -> NpuSmiReading:
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


# -- checks ---------------------------------------------------------------------------------------------

_DCMI_FIXES = {
    "-8005": "dcmi could not open the device manager: run as root or add the user to the HwHiAiUser group "
    "(usermod -aG HwHiAiUser $USER, then log in again); in a container pass --device /dev/davinci_manager "
    "--device /dev/devmm_svm --device /dev/hisi_hdc and mount /usr/local/dcmi and /usr/local/Ascend/driver",
    "-8020": "the device is held by another container or process: `npu-smi info` on the host lists it; stop it "
    "or give this container other /dev/davinciN devices",
}


def _error_fix(error: str) -> str:
    for code, fix in _DCMI_FIXES.items():
        if code in error:
            return fix
    return "run `npu-smi info` by hand; a driver that does not answer usually needs reinstalling and a reboot"


def check_cards(reading: NpuSmiReading, presence: NpuPresence) -> CheckResult:
    name = "npu_smi.cards"
    if reading.absent:
        if not presence.present:
            return skipped(name, G, f"{reading.absent}: {presence.evidence}")
        return failed(
            name,
            G,
            f"{reading.absent}, but {presence.evidence}",
            "npu-smi lists the cards",
            "put npu-smi on PATH (usually /usr/local/sbin or /usr/local/bin); in containers mount "
            "/usr/local/bin/npu-smi and /usr/local/dcmi from the host",
        )
    if reading.error is not None:
        return failed(name, G, f"npu-smi info failed: {reading.error}", "a table of cards", _error_fix(reading.error))
    table = reading.table
    assert table is not None
    if not table.chips:
        return failed(
            name,
            G,
            "npu-smi lists no chips",
            ">= 1 chip",
            "check the driver install (`dmesg | grep -i davinci`) and, in containers, the --device flags",
        )
    names = sorted({c.name for c in table.chips})
    return passed(
        name,
        G,
        f"{len(table.npu_ids)} NPU(s), {len(table.chips)} chip(s): {', '.join(names)}; driver {table.driver_version}",
    )


def check_health(reading: NpuSmiReading) -> CheckResult:
    name = "npu_smi.health"
    if reading.table is None or not reading.table.chips:
        return skipped(name, G, "no npu-smi table")
    bad = [c for c in reading.table.chips if c.health.upper() != "OK"]
    if not bad:
        return passed(name, G, f"all {len(reading.table.chips)} chip(s) OK", "Health OK")
    listing = ", ".join(f"NPU {c.npu_id} chip {c.chip_id} ({c.name}): {c.health}" for c in bad)
    fix = (
        "read the alarm with `npu-smi info -t health -i <NPU>` and the device log; leave the card out "
        "(ASCEND_RT_VISIBLE_DEVICES) until it is fixed"
    )
    if all(c.health.lower() == "warning" for c in bad):
        return warned(name, G, listing, "Health OK", fix)
    return failed(name, G, listing, "Health OK", fix)


def check_memory(reading: NpuSmiReading, gpu_memory_utilization: float) -> CheckResult:
    """vLLM asks for `gpu_memory_utilization` x total at start; memory already used beyond the rest
    makes it refuse to start (or start with too little KV cache)."""
    name = "npu_smi.memory"
    if reading.table is None or not reading.table.chips:
        return skipped(name, G, "no npu-smi table")
    limit = 1.0 - gpu_memory_utilization
    expected = f"<= {limit:.0%} of device memory in use before the server starts (--gpu-memory-utilization {gpu_memory_utilization})"
    busy = [c for c in reading.table.chips if c.device_total_mb and c.device_used_mb / c.device_total_mb > limit]
    used = ", ".join(f"{c.npu_id}/{c.chip_id}: {c.device_used_mb}/{c.device_total_mb} MB" for c in reading.table.chips)
    if not busy:
        return passed(name, G, f"in use (npu/chip): {used}", expected)
    worst = max(c.device_used_mb / c.device_total_mb for c in busy)
    procs = ", ".join(f"pid {p.pid} {p.name} ({p.memory_mb} MB on NPU {p.npu_id})" for p in reading.table.processes)
    holders = f"; processes: {procs}" if procs else "; npu-smi lists no process (another container holds it)"
    ids = " ".join(str(c.npu_id) for c in busy)
    return warned(
        name,
        G,
        f"busy chips on NPU {ids}: {used}{holders}",
        expected,
        f"free the cards (stop the processes listed) or lower --gpu-memory-utilization to {max(0.05, 0.95 - worst):.2f}",
    )


def check_npu_smi(reading: NpuSmiReading, presence: NpuPresence, ctx: CheckContext) -> list[CheckResult]:
    return [check_cards(reading, presence), check_health(reading), check_memory(reading, ctx.gpu_memory_utilization)]
