"""Reading the CSV files Ascend's profilers write, as they are in the field.

Quirks handled here once, for torch_npu's ASCEND_PROFILER_OUTPUT and msprof's mindstudio_profiler_output
alike (samples in tests/fixtures/profiling/, origins in its SOURCES.md):

- timestamps end in a TAB inside quotes (`"1736413971558972.912\t"`) so spreadsheets keep their digits;
- 'N/A' (and empty cells) where a column does not apply (HCCL rows have no Task ID or Block Dim);
- a column's name changed between versions (`Accelerator Core` / `Task Type`, `Block Dim` / `Block Num`,
  `Device_id` present or not), so every column is asked for by its alternatives;
- files can hold millions of kernels: only the columns a reader needs are parsed (`usecols`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from workbench.errors import WorkbenchError

MISSING = ("N/A", "NA", "", "null", "None")


def read_columns(
    path: Path,
    wanted: Mapping[str, Sequence[str]],
    *,
    required: Sequence[str] = (),
    numeric: Sequence[str] = (),
) -> pd.DataFrame:
    """The columns of a profiler CSV under canonical names.

    `wanted` maps a canonical name to the header spellings it may have ({'core': ('Accelerator Core',
    'Task Type')}); the first spelling present wins. A `required` column that is absent, an unreadable
    file or one without a header is one WorkbenchError naming the file and what is missing.
    `numeric` columns become float (the trailing TAB and 'N/A' are handled).
    """
    header = _header(path)
    chosen: dict[str, str] = {}
    for canonical, spellings in wanted.items():
        found = next((h for h in spellings if h in header), None)
        if found is not None:
            chosen[canonical] = found
    missing = [c for c in required if c not in chosen]
    if missing:
        names = "; ".join(f"{' or '.join(repr(s) for s in wanted[c])}" for c in missing)
        raise WorkbenchError(
            f"{path}: no column {names} (header: {', '.join(header[:12])}{', ...' if len(header) > 12 else ''}); "
            "this is not the profiler output the reader expects — re-export it with the profiler's own tool"
        )
    try:
        frame = pd.read_csv(
            path, usecols=list(chosen.values()), dtype=str, keep_default_na=False, skipinitialspace=True
        )
    except (OSError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise WorkbenchError(f"{path}: cannot parse as CSV ({exc}); check the file is complete") from None
    frame = frame.rename(columns={v: k for k, v in chosen.items()})
    for column in frame.columns:
        frame[column] = frame[column].str.strip()
    for column in numeric:
        if column in frame.columns:
            frame[column] = pd.to_numeric(frame[column].where(~frame[column].isin(MISSING)), errors="coerce")
    return frame


def _header(path: Path) -> list[str]:
    """The header row's column names (stripped); a clear error for an empty or unreadable file."""
    try:
        with path.open(encoding="utf-8-sig", errors="replace") as handle:
            line = handle.readline()
    except OSError as exc:
        raise WorkbenchError(f"{path}: cannot read ({exc.strerror}); check the path and permissions") from None
    names = [h.strip() for h in line.rstrip("\r\n").split(",")]
    if not line.strip() or not any(names):
        raise WorkbenchError(f"{path}: empty file, no header row; the profiler did not finish writing it")
    return names


def text_or_none(value: object) -> str | None:
    """A cell as text, None for the profilers' spellings of 'no value'."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    text = str(value).strip()
    return None if text in MISSING else text
