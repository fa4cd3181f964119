"""Run a scan: walk the paths, scan the files (in worker processes when there are many), join every
hit with the mapping table, and return a `ScanReport`.

Files are independent, so the work is spread over processes (`jobs`, default one per CPU) in batches
of a few files or a few MiB; small scans stay in this process, where starting workers would cost more
than it saves. An interruption (Ctrl-C) returns what was scanned so far, marked incomplete.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.scan.file_scan import Candidate, FileScanSettings, scan_chunk
from workbench.scan.findings import FileResult
from workbench.scan.mapping import load_mapping
from workbench.scan.placement import Tier
from workbench.scan.report import ScanReport
from workbench.scan.walker import WalkOptions, walk

PARALLEL_FROM_FILES = 64  # below this, worker start-up costs more than it saves
_CHUNK_FILES = 16
_CHUNK_BYTES = 2 * 2**20


@dataclass(frozen=True)
class ScanOptions:
    jobs: int = 0  # worker processes; 0: one per CPU this process may use
    walk: WalkOptions = field(default_factory=WalkOptions)
    max_file_mib: float = 5.0  # text files above this are reported as too large, not read
    mapping: str | Path | None = None  # None: policy/scan/cuda-mapping.yaml
    progress: bool = False


def available_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _existing(paths: Sequence[str | Path]) -> list[str]:
    if not paths:
        raise WorkbenchError("no path to scan; pass one or more directories or files")
    missing = [str(p) for p in paths if not os.path.lexists(p)]
    if missing:
        raise WorkbenchError(f"path {missing[0]!r} does not exist; pass a directory or file of the service to scan")
    return [os.fspath(p) for p in paths]


def _chunks(candidates: Sequence[Candidate]) -> Iterator[tuple[Candidate, ...]]:
    """Largest files first, in batches of at most _CHUNK_FILES files or about _CHUNK_BYTES."""
    batch: list[Candidate] = []
    size = 0
    for candidate in sorted(candidates, key=lambda c: -c.size):
        if batch and (len(batch) >= _CHUNK_FILES or size + candidate.size > _CHUNK_BYTES):
            yield tuple(batch)
            batch, size = [], 0
        batch.append(candidate)
        size += candidate.size
    if batch:
        yield tuple(batch)


def _scan_serial(candidates, settings, bar) -> tuple[list[FileResult], bool]:
    results: list[FileResult] = []
    try:
        for chunk in _chunks(candidates):
            results += scan_chunk(chunk, settings)
            bar.update(len(chunk))
    except KeyboardInterrupt:
        return results, False
    return results, True


def _scan_parallel(candidates, settings, jobs, bar) -> tuple[list[FileResult], bool]:
    results: list[FileResult] = []
    # forkserver: workers start from a clean interpreter, not a fork of a process with threads (Jupyter)
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("forkserver"))
    try:
        futures = {pool.submit(scan_chunk, chunk, settings): len(chunk) for chunk in _chunks(candidates)}
        for future in as_completed(futures):
            results += future.result()
            bar.update(futures[future])
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        return results, False
    pool.shutdown()
    return results, True


def scan(paths: Sequence[str | Path], options: ScanOptions | None = None) -> ScanReport:
    """Scan `paths` (directories or files) for what ties them to CUDA; see the package docstring."""
    from tqdm.auto import tqdm

    options = options or ScanOptions()
    if options.jobs < 0:
        raise WorkbenchError(f"jobs must be 0 (one per CPU) or more, got {options.jobs}")
    mapping = load_mapping(options.mapping)
    targets = _existing(paths)
    started = time.perf_counter()
    walked = walk(targets, options.walk)
    settings = FileScanSettings(mapping.npu_names, int(options.max_file_mib * 2**20), tuple(targets))
    jobs = min(options.jobs or available_cpus(), max(1, len(walked.candidates)))
    with tqdm(total=len(walked.candidates), desc="scan", unit="file", disable=not options.progress) as bar:
        if jobs > 1 and len(walked.candidates) >= PARALLEL_FROM_FILES:
            results, complete = _scan_parallel(walked.candidates, settings, jobs, bar)
        else:
            jobs = 1
            results, complete = _scan_serial(walked.candidates, settings, bar)
    findings = sorted(
        (dataclasses.replace(mapping.finding(hit), tier=result.tier) for result in results for hit in result.hits),
        key=lambda f: (Tier(f.tier).rank, f.file, f.line or 0, f.column or 0, f.rule),
    )
    problems = sorted(walked.problems + tuple(p for r in results for p in r.problems), key=lambda p: p.path)
    return ScanReport(
        paths=tuple(targets),
        findings=tuple(findings),
        problems=tuple(problems),
        files_scanned=sum(r.scanned for r in results),
        skipped=walked.skipped,
        seconds=time.perf_counter() - started,
        jobs=jobs,
        mapping=str(mapping.source or options.mapping or ""),
        complete=complete,
        not_scanned=walked.skipped_files,
    )
