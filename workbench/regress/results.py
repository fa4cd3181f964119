"""The result files the workbench writes, read back as runs that `regress` can compare.

Kinds read, by the document's `kind` (each producer declares its kind; files written before kinds existed
are recognised by the keys each kind always had, and files without a provenance stamp read with an empty one):

- bench JSON (`ascend-workbench bench --json OUT`): {"meta", "workload", "summary", "requests"} -> one run;
- sweep store (`DIR/results.jsonl`): one JSON point per line -> one run per point (a torn last line,
  as an interrupted sweep leaves it, is skipped like the sweep itself skips it);
- op-suite report (`compare-ops --json OUT`): {"provenance", "rows"} (or the older bare list of rows)
  -> one run whose accuracy verdicts are keyed op/case/dtype;
- dump comparison (`compare-dumps --json OUT`): {"summary", "rows", "provenance"} -> verdicts per module.

Runs are compared only within a *series*: the same kind of measurement of the same workload (lengths,
count, concurrency or rate, prefix share) and, for sweep points, the same swept parameters. Seeds are
not part of it: repeats use other prompts of the same shape on purpose.
"""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.accuracy.documents import DUMP_COMPARE_KIND, OP_SUITE_KIND
from workbench.errors import WorkbenchError
from workbench.results.envelope import kind_of, provenance_of
from workbench.results.jsonl import JsonlLog
from workbench.serving.load.metrics import BENCH_KIND
from workbench.sweep.store import SWEEP_POINT_KIND

RESULT_KINDS_HELP = "a bench JSON (bench --json), a sweep results.jsonl, or a compare-ops / compare-dumps --json report"


class RunKind(str, enum.Enum):
    BENCH = "bench"
    SWEEP_POINT = "sweep point"
    OP_SUITE = "op suite"
    DUMP_COMPARE = "dump compare"

    @property
    def family(self) -> str:
        """Kinds whose runs can be compared with each other: load runs, or one kind of accuracy report."""
        return "load" if self in (RunKind.BENCH, RunKind.SWEEP_POINT) else self.value


@dataclass(frozen=True)
class Run:
    """One measured run as `regress` sees it.

    metrics    the load summary's numbers (output_throughput, p99_ttft_ms, ...); empty for accuracy runs
    verdicts   accuracy verdict per case ('rms_norm/small/float16' -> 'pass'); empty for load runs
    status     'ok', or why the run did not measure (a sweep point that failed to start, failed requests)
    """

    kind: RunKind
    source: str
    series: str
    workload: dict[str, Any]
    provenance: dict[str, Any]
    metrics: dict[str, float] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)
    status: str = "ok"

    @property
    def created_at(self) -> str:
        return str(self.provenance.get("created_at") or "")


# -- workload identity --------------------------------------------------------------------------------

_IDENTITY_DEFAULTS = {"duration_s": None, "burstiness": 1.0, "temperature": 0.0, "request_rate": None}


def _rate(value: Any) -> float | None:
    """Closed loop is 'inf' in a bench JSON and None in a sweep point: both become None."""
    if value is None:
        return None
    rate = float(value)
    return None if math.isinf(rate) else rate


def load_identity(workload: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, Any]:
    """What must match for two load runs to be comparable (the seed and timeouts left out)."""
    keys = (
        "input_len",
        "output_len",
        "num_prompts",
        "duration_s",
        "concurrency",
        "request_rate",
        "burstiness",
        "prefix_ratio",
        "temperature",
    )
    identity = {k: workload.get(k, _IDENTITY_DEFAULTS.get(k)) for k in keys}
    identity["request_rate"] = _rate(identity["request_rate"])
    if params:
        identity["params"] = dict(sorted(params.items()))
    return identity


def series_label(kind: RunKind, identity: dict[str, Any]) -> str:
    """'in=128 out=64 n=32 c=8' (+ swept params) for load runs; the kind for accuracy reports."""
    if kind.family != "load":
        return kind.value
    count = f"n={identity['num_prompts']}" if identity.get("num_prompts") else f"{identity.get('duration_s')}s"
    load = f"rate={identity['request_rate']:g}/s" if identity.get("request_rate") else ""
    load += f" c={identity['concurrency']}" if identity.get("concurrency") else ""
    extra = f" prefix={identity['prefix_ratio']:g}" if identity.get("prefix_ratio") else ""
    extra += f" burstiness={identity['burstiness']:g}" if identity.get("burstiness", 1.0) != 1.0 else ""
    extra += f" temperature={identity['temperature']:g}" if identity.get("temperature") else ""
    params = " ".join(f"{k}={v}" for k, v in (identity.get("params") or {}).items())
    text = f"in={identity['input_len']} out={identity['output_len']} {count}{load}{extra}"
    return f"{text} [{params}]" if params else text


def _numbers(summary: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in summary.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


# -- readers per kind ------------------------------------------------------------------------------------


def _bench_run(data: dict[str, Any], source: str) -> Run:
    identity = load_identity(data.get("workload") or {})
    summary = data.get("summary") or {}
    failed = int(summary.get("failed") or 0)
    status = "ok" if failed == 0 else f"{failed} of {summary.get('sent')} requests failed"
    return Run(
        RunKind.BENCH,
        source,
        series_label(RunKind.BENCH, identity),
        identity,
        provenance_of(data),
        metrics=_numbers(summary),
        status=status,
    )


def _sweep_run(point: dict[str, Any], source: str) -> Run:
    identity = load_identity(point.get("workload") or {}, point.get("params") or {})
    status = str(point.get("status") or "ok")
    return Run(
        RunKind.SWEEP_POINT,
        f"{source} [{point.get('point_id')}]",
        series_label(RunKind.SWEEP_POINT, identity),
        identity,
        provenance_of(point),
        metrics=_numbers(point.get("summary") or {}),
        status=status,
    )


def _op_suite_run(rows: list[dict[str, Any]], stamp: dict[str, Any], source: str) -> Run:
    verdicts = {f"{r['op']}/{r['case']}/{r['dtype']}": str(r["verdict"]) for r in rows}
    return Run(RunKind.OP_SUITE, source, RunKind.OP_SUITE.value, {"cases": len(verdicts)}, stamp, verdicts=verdicts)


def _dump_compare_run(data: dict[str, Any], source: str) -> Run:
    verdicts = {str(r["key"]): str(r["verdict"]) for r in data.get("rows") or []}
    return Run(
        RunKind.DUMP_COMPARE,
        source,
        RunKind.DUMP_COMPARE.value,
        {"modules": len(verdicts)},
        provenance_of(data),
        verdicts=verdicts,
    )


def _not_a_result(path: Path, why: str) -> WorkbenchError:
    hint = ""
    if path.name.endswith(".requests.jsonl"):
        hint = f"; this is the per-request log of a bench run: pass {path.name.removesuffix('.requests.jsonl')}.json"
    return WorkbenchError(f"{path}: {why}; regress reads {RESULT_KINDS_HELP}{hint}")


def _from_json(data: Any, path: Path) -> list[Run]:
    stamped = kind_of(data)
    if stamped is None:
        return _from_unstamped_json(data, path)
    reader = _JSON_READERS.get(stamped[0])
    if reader is None:
        raise _not_a_result(path, f"a {stamped[0]!r} result, which regress does not compare")
    kind, read = reader
    return [read(kind.check(data, path), str(path))]


def _from_unstamped_json(data: Any, path: Path) -> list[Run]:
    """Files written before documents carried a kind: recognised by the keys each kind always had."""
    source = str(path)
    if isinstance(data, dict) and {"workload", "summary"} <= data.keys():
        return [_bench_run(data, source)]
    if isinstance(data, dict) and isinstance(data.get("rows"), list):
        rows = data["rows"]
        if all(isinstance(r, dict) and {"op", "case", "dtype", "verdict"} <= r.keys() for r in rows):
            return [_op_suite_run(rows, provenance_of(data), source)]
        if all(isinstance(r, dict) and {"key", "verdict"} <= r.keys() for r in rows):
            return [_dump_compare_run(data, source)]
    if isinstance(data, list) and data and all(isinstance(r, dict) and "verdict" in r and "op" in r for r in data):
        return [_op_suite_run(data, {}, source)]  # compare-ops before it carried a provenance stamp
    raise _not_a_result(path, "not a result file the workbench writes")


# kind name -> (the producer's kind, the reader that turns its document into a run)
_JSON_READERS = {
    BENCH_KIND.name: (BENCH_KIND, _bench_run),
    OP_SUITE_KIND.name: (OP_SUITE_KIND, lambda data, source: _op_suite_run(data["rows"], provenance_of(data), source)),
    DUMP_COMPARE_KIND.name: (DUMP_COMPARE_KIND, _dump_compare_run),
}


def _from_jsonl(path: Path) -> list[Run]:
    # The sweep's own log rule: a torn last line is an interrupted write and a line that is not JSON is
    # reported and skipped (workbench.results.jsonl), so regress reads exactly the points the sweep reads.
    records = JsonlLog(path).read().records
    points = [
        SWEEP_POINT_KIND.check(r, path) if kind_of(r) else r
        for r in records
        if SWEEP_POINT_KIND.matches(r) or (kind_of(r) is None and {"point_id", "workload", "summary"} <= r.keys())
    ]
    if not points:
        raise _not_a_result(path, "holds no sweep point")
    return [_sweep_run(point, str(path)) for point in points]


def read_results(path: Path | str) -> list[Run]:
    """The runs in one result file, or one WorkbenchError naming the file and what it should be."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WorkbenchError(f"{path}: result file not found; check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _not_a_result(path, f"cannot be read as text ({exc})") from None
    if path.suffix == ".jsonl":
        return _from_jsonl(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _not_a_result(path, f"not valid JSON (line {exc.lineno}: {exc.msg})") from None
    return _from_json(data, path)


def read_all(paths: list[Path] | list[str]) -> list[Run]:
    """Every run of every file; the first bad file stops it with its message (nothing is half-read)."""
    if not paths:
        raise WorkbenchError(f"no result files given; pass {RESULT_KINDS_HELP}")
    return [run for path in paths for run in read_results(path)]
