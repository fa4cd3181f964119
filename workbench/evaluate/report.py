"""Evaluation results read back: one run's summary per data set, and a test run against a reference run.

    summaries = summarize_run(Path("runs/evaluate/cpu-smollm2"))           # {data set: DatasetSummary}
    comparison = compare_runs(reference_dir, test_dir)                    # float vs W8A8, side by side
    print(comparison.text()); comparison.table()                          # verdicts per data set

A comparison pairs problems by id and uses only what both sides measured on the same tokens:

- NLL: mean NLL per reference token on each side over the common problems, its delta (test - reference,
  nats/token) and relative rise in percent; problems whose prompt or reference tokenised differently
  (another tokenizer) are left out and counted;
- greedy agreement (`greedy.py`): mean common-prefix fraction, token-weighted, exact-match rate;
- pass@1 on each side over the problems both executed, and the drop in percentage points.

Each metric is judged against `policy/evaluate/thresholds.yaml` (pass / warn / fail), a data set takes
its worst verdict, and when code's NLL rises clearly more than prose's, the report says so in a sentence
(docs/METHOD.md §13: chat models usually lose little to W8A8, code and maths can lose much more).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.evaluate.datasets import DatasetKind
from workbench.evaluate.greedy import AgreementTotal, agreement, total_agreement
from workbench.evaluate.nll import NllResult, NllTotal, total_nll
from workbench.evaluate.store import RecordFile
from workbench.evaluate.thresholds import EvaluateThresholds, KindThresholds, judge_loss, judge_minimum
from workbench.results.envelope import DocumentKind, envelope
from workbench.results.verdict import Verdict

EVALUATE_KIND = DocumentKind("evaluate")  # OUT/summary.json of an evaluation: per data set, and the comparison


@dataclass(frozen=True)
class RunFile:
    """One data set's record file, read: its header and the last good record of each kind per problem."""

    path: Path
    header: dict[str, Any]
    nll: dict[str, dict[str, Any]]
    greedy: dict[str, dict[str, Any]]
    execution: dict[str, dict[str, Any]]
    errors: dict[str, int]  # kind -> problems whose last record of that kind is an error

    @property
    def dataset(self) -> str:
        return self.header["key"]["dataset"]

    @property
    def kind(self) -> DatasetKind:
        return DatasetKind(self.header["dataset"]["kind"])

    @property
    def model(self) -> str:
        return self.header["key"]["model"]


def read_run_file(path: Path) -> RunFile:
    store = RecordFile(path)
    header = store.header()
    if header is None or "key" not in header:
        raise WorkbenchError(f"{path}: not an evaluate record file (no header line); pass a directory `evaluate` wrote")
    good, errors = {}, {}
    for kind in ("nll", "greedy", "execution"):
        records = store.records(kind)
        good[kind] = {i: r for i, r in records.items() if "error" not in r}
        errors[kind] = len(records) - len(good[kind])
    return RunFile(Path(path), header, good["nll"], good["greedy"], good["execution"], errors)


def read_run(out_dir: Path) -> dict[str, RunFile]:
    """Every data set's record file in an evaluate output directory, by data-set name."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise WorkbenchError(f"{out_dir}: no such evaluate run directory; pass the --out of an earlier evaluate")
    runs = [read_run_file(p) for p in sorted(out_dir.glob("*.jsonl"))]
    if not runs:
        raise WorkbenchError(f"{out_dir}: holds no evaluate results (*.jsonl); run evaluate with --out {out_dir} first")
    return {run.dataset: run for run in runs}


def _nll_result(record: dict[str, Any]) -> NllResult:
    return NllResult(tuple(record["logprobs"]), float(record["nll_sum"]), int(record["clamped"]))


# -- one run -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetSummary:
    dataset: str
    kind: DatasetKind
    model: str
    nll: NllTotal
    completions: int
    mean_completion_tokens: float
    finish_reasons: dict[str, int]
    executed: int
    passed: int
    outcomes: dict[str, int]
    errors: dict[str, int]
    request_seconds: float  # sum over requests (they overlap when concurrency > 1)

    @property
    def pass_at_1(self) -> float:
        return self.passed / self.executed if self.executed else math.nan

    def row(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "kind": self.kind.value,
            "model": self.model,
            "nll_problems": self.nll.problems,
            "nll_tokens": self.nll.tokens,
            "nll_mean": self.nll.mean,
            "perplexity": self.nll.perplexity,
            "completions": self.completions,
            "mean_completion_tokens": self.mean_completion_tokens,
            "executed": self.executed,
            "passed": self.passed,
            "pass_at_1": self.pass_at_1,
            "errors": sum(self.errors.values()),
        }

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(
            kind=self.kind.value,
            nll={**asdict(self.nll), "mean": self.nll.mean, "perplexity": self.nll.perplexity},
            pass_at_1=self.pass_at_1,
        )
        return data


def summarize(run: RunFile) -> DatasetSummary:
    lengths = [len(r["token_ids"]) for r in run.greedy.values()]
    records = [*run.nll.values(), *run.greedy.values(), *run.execution.values()]
    return DatasetSummary(
        dataset=run.dataset,
        kind=run.kind,
        model=run.model,
        nll=total_nll([_nll_result(r) for r in run.nll.values()]),
        completions=len(lengths),
        mean_completion_tokens=sum(lengths) / len(lengths) if lengths else math.nan,
        finish_reasons=dict(Counter(str(r.get("finish_reason")) for r in run.greedy.values())),
        executed=len(run.execution),
        passed=sum(r["outcome"] == "passed" for r in run.execution.values()),
        outcomes=dict(Counter(r["outcome"] for r in run.execution.values())),
        errors={k: v for k, v in run.errors.items() if v},
        request_seconds=math.fsum(float(r.get("duration_s", 0.0)) for r in records),
    )


def summarize_run(out_dir: Path) -> dict[str, DatasetSummary]:
    return {name: summarize(run) for name, run in read_run(out_dir).items()}


# -- test against reference ----------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricVerdict:
    """One metric of a data set against the reference run, and the threshold's verdict on it."""

    metric: str
    value: float | None
    verdict: Verdict | None  # None: nothing to judge (no problem measured on both sides)
    detail: str


@dataclass(frozen=True)
class DatasetComparison:
    dataset: str
    kind: DatasetKind
    nll_problems: int
    nll_reference: float
    nll_test: float
    retokenised: int  # problems left out of NLL and agreement: the two sides' tokens differ
    worst_problem: str | None  # the problem whose mean NLL rose most
    worst_delta: float
    agreement: AgreementTotal
    pass_problems: int
    pass_reference: float
    pass_test: float
    findings: tuple[MetricVerdict, ...] = field(default=())

    @property
    def nll_delta(self) -> float:
        return self.nll_test - self.nll_reference

    @property
    def nll_increase_pct(self) -> float:
        return 100.0 * self.nll_delta / self.nll_reference if self.nll_problems else math.nan

    @property
    def pass_drop_pct(self) -> float:
        return 100.0 * (self.pass_reference - self.pass_test) if self.pass_problems else math.nan

    @property
    def verdict(self) -> Verdict | None:
        """The worst verdict of the findings; None when none could be judged."""
        judged = [f.verdict for f in self.findings if f.verdict is not None]
        return Verdict.worst(judged) if judged else None

    def row(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "kind": self.kind.value,
            "verdict": _name(self.verdict),
            "nll_problems": self.nll_problems,
            "nll_reference": self.nll_reference,
            "nll_test": self.nll_test,
            "nll_delta": self.nll_delta,
            "nll_increase_pct": self.nll_increase_pct,
            "greedy_problems": self.agreement.problems,
            "greedy_agreement": self.agreement.mean,
            "greedy_token_weighted": self.agreement.token_weighted,
            "greedy_exact_match": self.agreement.exact_match_rate,
            "pass_problems": self.pass_problems,
            "pass_at_1_reference": self.pass_reference,
            "pass_at_1_test": self.pass_test,
            "pass_drop_pct": self.pass_drop_pct,
            "retokenised": self.retokenised,
            "worst_problem": self.worst_problem,
            "worst_nll_delta": self.worst_delta,
        }


def _same_tokens(a: dict[str, Any], b: dict[str, Any], *keys: str) -> bool:
    return all(a.get(k) == b.get(k) for k in keys)


def _nll_side_by_side(reference: RunFile, test: RunFile) -> tuple[int, float, float, int, str | None, float]:
    common = [i for i in reference.nll if i in test.nll]
    same = [i for i in common if _same_tokens(reference.nll[i], test.nll[i], "prompt_sha", "reference_ids")]
    ref = total_nll([_nll_result(reference.nll[i]) for i in same])
    tst = total_nll([_nll_result(test.nll[i]) for i in same])
    deltas = {i: _nll_result(test.nll[i]).mean - _nll_result(reference.nll[i]).mean for i in same}
    worst = max(deltas, key=lambda i: deltas[i], default=None)
    return len(same), ref.mean, tst.mean, len(common) - len(same), worst, deltas[worst] if worst else math.nan


def compare_files(reference: RunFile, test: RunFile, limits: KindThresholds) -> DatasetComparison:
    """One data set, test run against reference run, judged against `limits`."""
    nll_n, nll_ref, nll_test, retokenised, worst, worst_delta = _nll_side_by_side(reference, test)
    common = [i for i in reference.greedy if i in test.greedy]
    same = [i for i in common if _same_tokens(reference.greedy[i], test.greedy[i], "prompt_sha")]
    agree = total_agreement([agreement(test.greedy[i]["token_ids"], reference.greedy[i]["token_ids"]) for i in same])
    executed = [i for i in reference.execution if i in test.execution]
    passed = {
        side: sum(run.execution[i]["outcome"] == "passed" for i in executed)
        for side, run in (("reference", reference), ("test", test))
    }
    ratio = {side: passed[side] / len(executed) if executed else math.nan for side in passed}
    comparison = DatasetComparison(
        reference.dataset,
        reference.kind,
        nll_n,
        nll_ref,
        nll_test,
        max(retokenised, len(common) - len(same)),
        worst,
        worst_delta,
        agree,
        len(executed),
        ratio["reference"],
        ratio["test"],
    )
    return _judged(comparison, limits)


def _judged(c: DatasetComparison, limits: KindThresholds) -> DatasetComparison:
    findings = [
        MetricVerdict(
            "nll_increase_pct",
            c.nll_increase_pct,
            judge_loss(c.nll_increase_pct, limits.nll_increase_pct),
            f"mean NLL {c.nll_reference:.4f} -> {c.nll_test:.4f} nats/token over {c.nll_problems} problems",
        ),
        MetricVerdict(
            "greedy_agreement",
            c.agreement.mean,
            judge_minimum(c.agreement.mean, limits.greedy_agreement),
            f"{c.agreement.exact_match_rate:.0%} of {c.agreement.problems} greedy completions identical",
        ),
    ]
    if c.kind is DatasetKind.CODE:
        findings.append(_pass_at_1_finding(c, limits))
    return replace(c, findings=tuple(findings))


def _pass_at_1_finding(c: DatasetComparison, limits: KindThresholds) -> MetricVerdict:
    """pass@1 judged only where it can move: when the reference passes no problem, it cannot drop, and a
    0-to-0 "no change" would read as a measurement (a 135M model on a handful of HumanEval problems)."""
    detail = f"pass@1 {c.pass_reference:.1%} -> {c.pass_test:.1%} over {c.pass_problems} problems"
    if c.pass_problems and c.pass_reference == 0:
        return MetricVerdict(
            "pass_at_1_drop_pct",
            None,
            None,
            f"{detail}: no problem passes on the reference side, so pass@1 cannot show a drop here; "
            "NLL and greedy agreement carry the comparison (more problems, or a stronger model, make it count)",
        )
    return MetricVerdict(
        "pass_at_1_drop_pct", c.pass_drop_pct, judge_loss(c.pass_drop_pct, limits.pass_at_1_drop_pct), detail
    )


@dataclass(frozen=True)
class Comparison:
    reference_dir: str
    test_dir: str
    reference_model: str
    test_model: str
    datasets: tuple[DatasetComparison, ...]
    sentences: tuple[str, ...]

    @property
    def verdict(self) -> Verdict | None:
        judged = [d.verdict for d in self.datasets if d.verdict is not None]
        return Verdict.worst(judged) if judged else None

    def table(self) -> Any:
        import pandas as pd

        return pd.DataFrame([d.row() for d in self.datasets])

    def text(self) -> str:
        lines = [
            f"test {self.test_model} ({self.test_dir}) against reference {self.reference_model} "
            f"({self.reference_dir}): {self.verdict.value}"
        ]
        for d in self.datasets:
            lines.append(f"  {d.dataset} ({d.kind.value}): {_name(d.verdict)}")
            lines += [
                f"    {f.metric:20s} {_number(f.value):>10s}  {_name(f.verdict):8s} {f.detail}" for f in d.findings
            ]
            if d.retokenised:
                lines.append(f"    {d.retokenised} problems left out: the two sides tokenised them differently")
        return "\n".join(lines + list(self.sentences))

    def to_dict(self) -> dict[str, Any]:
        return {
            "reference_dir": self.reference_dir,
            "test_dir": self.test_dir,
            "verdict": _name(self.verdict),
            "reference_model": self.reference_model,
            "test_model": self.test_model,
            "datasets": [
                {**d.row(), "findings": [{**asdict(f), "verdict": _name(f.verdict)} for f in d.findings]}
                for d in self.datasets
            ],
            "sentences": list(self.sentences),
        }


def _name(verdict: Verdict | None) -> str:
    return verdict.value if verdict is not None else "no data"


def _number(value: float | None) -> str:
    return "n/a" if value is None or value != value else f"{value:.4g}"


def code_vs_prose(datasets: tuple[DatasetComparison, ...], thresholds: EvaluateThresholds) -> tuple[str, ...]:
    """The sentence saying code degrades more than prose, when the NLL rises say so (else nothing)."""
    rule = thresholds.code_vs_prose
    code = [d for d in datasets if d.kind is DatasetKind.CODE and d.nll_problems]
    prose = [d for d in datasets if d.kind is DatasetKind.TEXT and d.nll_problems]
    if not code or not prose:
        return ()
    worst_code = max(code, key=lambda d: d.nll_increase_pct)
    worst_prose = max(prose, key=lambda d: d.nll_increase_pct)
    rise, prose_rise = worst_code.nll_increase_pct, worst_prose.nll_increase_pct
    if rise < rule.min_pct or rise < rule.ratio * max(prose_rise, 0.0):
        return ()
    return (
        f"Code degrades more than prose: the mean NLL per token rises {rise:.2f}% on {worst_code.dataset} against "
        f"{prose_rise:.2f}% on {worst_prose.dataset}; judge code and maths workloads on their own before adopting "
        "this configuration (docs/METHOD.md §13).",
    )


GENERATION_KEYS = ("max_tokens_code", "max_tokens_text", "code_stop")


def _require_comparable(reference: RunFile, test: RunFile) -> None:
    """Same data-set content and the same generation settings, or one error saying which differs."""
    ref_key, test_key = reference.header["key"], test.header["key"]
    if ref_key.get("dataset_digest") != test_key.get("dataset_digest"):
        raise WorkbenchError(
            f"{test.path} measured another version of data set {reference.dataset!r} than {reference.path} "
            f"(digest {test_key.get('dataset_digest')} vs {ref_key.get('dataset_digest')}); evaluate both with the "
            "same data-set file"
        )
    for key in GENERATION_KEYS:
        if ref_key.get(key) != test_key.get(key):
            raise WorkbenchError(
                f"{test.path} used {key} {test_key.get(key)!r}, {reference.path} {ref_key.get(key)!r}: greedy "
                "completions are only comparable with the same settings; rerun with the same --max-tokens"
            )


def compare_runs(reference_dir: Path, test_dir: Path, thresholds: EvaluateThresholds | None = None) -> Comparison:
    """Every data set both runs measured, test against reference, judged and with the code/prose sentence."""
    from workbench.evaluate.thresholds import load_thresholds

    thresholds = thresholds or load_thresholds()
    reference, test = read_run(reference_dir), read_run(test_dir)
    shared = [name for name in reference if name in test]
    if not shared:
        raise WorkbenchError(
            f"{test_dir} and {reference_dir} share no data set ({', '.join(test)} vs {', '.join(reference)}); "
            "evaluate the same --dataset on both"
        )
    for name in shared:
        _require_comparable(reference[name], test[name])
    datasets = tuple(
        compare_files(reference[name], test[name], thresholds.for_kind(reference[name].kind)) for name in shared
    )
    models = (reference[shared[0]].model, test[shared[0]].model)
    return Comparison(str(reference_dir), str(test_dir), *models, datasets, code_vs_prose(datasets, thresholds))


def summary_table(out_dir: Path) -> Any:
    """One row per data set of an evaluate run (NLL, perplexity, completions, pass@1, errors)."""
    import pandas as pd

    return pd.DataFrame([summary.row() for summary in summarize_run(out_dir).values()])


def write_summary(out_dir: Path, comparison: Comparison | None = None) -> Path:
    """`out_dir/summary.json`: every data set's summary (and the comparison), stamped with the run's provenance."""
    import json

    runs = read_run(out_dir)
    stamp = next(iter(runs.values())).header.get("provenance") or {}
    payload: dict[str, Any] = {"datasets": {name: summarize(run).to_dict() for name, run in runs.items()}}
    if comparison is not None:
        payload["comparison"] = comparison.to_dict()
        payload["reference_provenance"] = next(iter(read_run(Path(comparison.reference_dir)).values())).header.get(
            "provenance"
        )
    path = Path(out_dir) / "summary.json"
    document = envelope(payload, stamp, EVALUATE_KIND)
    path.write_text(json.dumps(document, indent=1, default=str, allow_nan=True))
    return path
