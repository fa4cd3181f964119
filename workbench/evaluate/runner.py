"""Evaluate data sets on one server: NLL, greedy completions and pass@1, written as they finish.

    with connect(url=URL) as server:                     # or connect(recipe=...): launched and stopped
        out_dir = evaluate(server, ["humaneval", "text"], limit=20)     # runs/evaluate/<model>/*.jsonl

Per problem, a worker thread tokenises the prompt and the reference with the server's tokenizer, asks
for the reference's prompt logprobs (NLL, `nll.py`) and for a greedy completion (`greedy.py`); the main
thread appends each record to the data set's `RecordFile` as it arrives and runs the completion against
the problem's tests in the sandbox (`execution.py`, one at a time). Rerunning with the same output
directory skips everything already recorded (a failed request is tried again).
"""

from __future__ import annotations

import enum
import hashlib
import itertools
import re
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from tqdm.auto import tqdm

from workbench.evaluate import endpoints
from workbench.evaluate.datasets import Dataset, Problem, file_name
from workbench.evaluate.execution import Limits, run_problem
from workbench.evaluate.greedy import CODE_STOP
from workbench.evaluate.nll import TokenizedProblem, reference_nll, tokenize_problem
from workbench.evaluate.store import RecordFile
from workbench.recipes import ServingRecipe


class Measure(str, enum.Enum):
    NLL = "nll"
    GREEDY = "greedy"
    PASS_AT_1 = "pass1"  # runs the greedy completion, so it implies greedy


ALL_MEASURES = frozenset(Measure)


@dataclass(frozen=True)
class Settings:
    """How a data set is measured. Only the generation settings enter the run key (see `key`)."""

    measures: frozenset[Measure] = ALL_MEASURES
    max_tokens_code: int = 384
    max_tokens_text: int = 128
    concurrency: int = 4
    limits: Limits = field(default_factory=Limits)

    def key(self) -> dict[str, Any]:
        return {
            "max_tokens_code": self.max_tokens_code,
            "max_tokens_text": self.max_tokens_text,
            "code_stop": list(CODE_STOP),
        }


@dataclass(frozen=True)
class Target:
    """The server measured, as the result files name it."""

    url: str
    model: str
    model_root: str | None = None  # the served directory (/v1/models `root`), tells two local models apart
    recipe: ServingRecipe | None = None


def sha(text: str | Sequence[int]) -> str:
    data = text if isinstance(text, str) else ",".join(map(str, text))
    return hashlib.sha256(data.encode()).hexdigest()[:16]


def _nll_record(problem: Problem, tokens: TokenizedProblem, client: httpx.Client, target: Target) -> dict[str, Any]:
    started = time.monotonic()
    entries = endpoints.prompt_logprobs(client, target.url, target.model, tokens.request_ids)
    try:
        result = reference_nll(entries, tokens.request_ids, len(tokens.prompt_ids))
    except ValueError as exc:
        raise endpoints.RequestFailed(f"unexpected prompt_logprobs: {exc}") from None
    return {
        "kind": "nll",
        "id": problem.id,
        "prompt_tokens": len(tokens.prompt_ids),
        "prompt_sha": sha(tokens.prompt_ids),
        "reference_ids": list(tokens.reference_ids),
        "logprobs": list(result.logprobs),
        "nll_sum": result.nll_sum,
        "n_tokens": result.n_tokens,
        "clamped": result.clamped,
        "duration_s": round(time.monotonic() - started, 3),
    }


def _greedy_record(problem: Problem, tokens: TokenizedProblem, context: _Context) -> dict[str, Any]:
    started = time.monotonic()
    wanted = context.settings.max_tokens_code if problem.executable else context.settings.max_tokens_text
    room = getattr(context.tokenizer, "max_model_len", None)
    max_tokens = max(1, min(wanted, room - len(tokens.prompt_ids))) if room else wanted
    stop = CODE_STOP if problem.executable else ()
    done = endpoints.greedy_completion(
        context.client, context.target.url, context.target.model, tokens.prompt_ids, max_tokens, stop, context.tokenizer
    )
    return {
        "kind": "greedy",
        "id": problem.id,
        "prompt_tokens": len(tokens.prompt_ids),
        "prompt_sha": sha(tokens.prompt_ids),
        "max_tokens": max_tokens,
        "token_ids": list(done.token_ids),
        "text": done.text,
        "finish_reason": done.finish_reason,
        "token_ids_from_text": done.token_ids_from_text,
        "duration_s": round(time.monotonic() - started, 3),
    }


@dataclass(frozen=True)
class _Context:
    client: httpx.Client
    target: Target
    tokenizer: Any
    settings: Settings


def measure_problem(problem: Problem, todo: frozenset[Measure], context: _Context) -> list[dict[str, Any]]:
    """The NLL and greedy records of one problem (a failed request becomes a record with `error`)."""
    try:
        tokens = tokenize_problem(problem, context.tokenizer)
    except endpoints.RequestFailed as exc:
        return [
            {"kind": m.value, "id": problem.id, "error": f"tokenize: {exc}"} for m in todo if m is not Measure.PASS_AT_1
        ]
    records = []
    if Measure.NLL in todo:
        try:
            records.append(_nll_record(problem, tokens, context.client, context.target))
        except endpoints.RequestFailed as exc:
            records.append({"kind": "nll", "id": problem.id, "error": str(exc)})
    if Measure.GREEDY in todo:
        try:
            records.append(_greedy_record(problem, tokens, context))
        except endpoints.RequestFailed as exc:
            records.append({"kind": "greedy", "id": problem.id, "error": str(exc)})
    return records


def execution_record(problem: Problem, greedy: dict[str, Any], limits: Limits) -> dict[str, Any]:
    result = run_problem(problem, greedy["text"], limits)
    return {"kind": "execution", "id": problem.id, "text_sha": sha(greedy["text"]), **result.to_dict()}


def _recorded(store: RecordFile, kind: str, problem: Problem) -> bool:
    """True when the last `kind` record of `problem` is a result (not missing, not a failed request)."""
    record = store.records(kind).get(problem.id)
    return record is not None and "error" not in record


def _todo(problem: Problem, store: RecordFile, measures: frozenset[Measure]) -> frozenset[Measure]:
    """The request-based measures this problem still needs (NLL only where there is a reference)."""
    todo = set()
    if Measure.NLL in measures and problem.reference and not _recorded(store, "nll", problem):
        todo.add(Measure.NLL)
    wants_greedy = Measure.GREEDY in measures or (Measure.PASS_AT_1 in measures and problem.executable)
    if wants_greedy and not _recorded(store, "greedy", problem):
        todo.add(Measure.GREEDY)
    return frozenset(todo)


def _needs_execution(problem: Problem, store: RecordFile, measures: frozenset[Measure]) -> dict[str, Any] | None:
    """The greedy record to execute when pass@1 is wanted and not yet recorded for this very completion."""
    if Measure.PASS_AT_1 not in measures or not problem.executable:
        return None
    greedy = store.records("greedy").get(problem.id)
    if greedy is None or "error" in greedy:
        return None
    done = store.records("execution").get(problem.id)
    return None if done is not None and done.get("text_sha") == sha(greedy["text"]) else greedy


def evaluate_dataset(dataset: Dataset, store: RecordFile, context: _Context, *, progress: bool = True) -> None:
    """Measure every problem of `dataset` that `store` does not hold yet; records are appended as they come."""
    measures = context.settings.measures
    todo = {p.id: _todo(p, store, measures) for p in dataset.problems}
    pending = [p for p in dataset.problems if todo[p.id] or _needs_execution(p, store, measures)]
    bar = tqdm(
        total=len(pending), desc=f"{dataset.name} on {context.target.model}", unit="problem", disable=not progress
    )
    pool = ThreadPoolExecutor(max_workers=context.settings.concurrency, thread_name_prefix="evaluate")
    try:
        futures: dict[Future, Problem] = {
            pool.submit(measure_problem, p, todo[p.id], context): p for p in pending if todo[p.id]
        }
        finished = [([], p) for p in pending if not todo[p.id]]  # only the execution was missing
        arriving = ((f.result(), futures[f]) for f in as_completed(futures))  # lazily: written as each lands
        for records, problem in itertools.chain(finished, arriving):
            _finish(problem, records, store, context)
            bar.set_postfix_str(_running_totals(store), refresh=False)
            bar.update()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # Ctrl-C: queued problems are dropped, written ones kept
        bar.close()


def _running_totals(store: RecordFile) -> str:
    """'nll 1.234, pass 3/10' for the progress bar."""
    nll = [r for r in store.records("nll").values() if "error" not in r]
    tokens = sum(r["n_tokens"] for r in nll)
    text = f"nll {sum(r['nll_sum'] for r in nll) / tokens:.3f}" if tokens else "nll -"
    executed = store.records("execution").values()
    return text + (f", pass {sum(r['outcome'] == 'passed' for r in executed)}/{len(executed)}" if executed else "")


def _finish(problem: Problem, records: list[dict[str, Any]], store: RecordFile, context: _Context) -> None:
    """Append the problem's records, then run its completion against the tests when pass@1 still needs it."""
    for record in records:
        store.append(record)
    greedy = _needs_execution(problem, store, context.settings.measures)
    if greedy is not None:
        store.append(execution_record(problem, greedy, context.settings.limits))


def open_tokenizer(client: httpx.Client, target: Target, tokenizer_dir: Path | None) -> Any:
    """The server's `/tokenize` when it has one, else a local tokenizer (`tokenizer_dir` or the served dir)."""
    if tokenizer_dir is None and endpoints.has_tokenize_endpoint(client, target.url, target.model):
        return endpoints.ServerTokenizer(client, target.url, target.model)
    directory = tokenizer_dir or (Path(target.model_root) if target.model_root else None)
    if directory is None or not Path(directory).is_dir():
        from workbench.errors import WorkbenchError

        raise WorkbenchError(
            f"{target.url} has no /tokenize endpoint and serves {target.model!r} from a directory this machine "
            "cannot read; pass --tokenizer DIR (the model's tokenizer files) so token boundaries are exact"
        )
    return endpoints.LocalTokenizer(Path(directory))


def store_path(out_dir: Path, dataset: Dataset) -> Path:
    return Path(out_dir) / f"{file_name(dataset)}.jsonl"


def target_for(server: Any, recipe: ServingRecipe | None = None) -> Target:
    """The Target of a running `workbench.serving.server.Server` (its model's directory from /v1/models)."""
    from workbench.serving.client import list_models

    roots = {entry.id: entry.root for entry in list_models(server.url)}
    return Target(server.url, server.model, roots.get(server.model), recipe)


def run_header(
    dataset: Dataset, target: Target, settings: Settings, tokenizer: Any, stamp: dict[str, Any]
) -> dict[str, Any]:
    """The header line of a data set's record file: its run key, the data set, the settings, provenance."""
    source = "server /tokenize" if isinstance(tokenizer, endpoints.ServerTokenizer) else "local tokenizer"
    key = {
        "dataset": dataset.name,
        "dataset_digest": dataset.digest,
        "model": target.model,
        "model_root": target.model_root,
        "tokenizer": source,
        **settings.key(),
    }
    limits = settings.limits
    return {
        "key": key,
        "dataset": dataset.describe(),
        "provenance": stamp,
        "settings": {
            "measures": sorted(m.value for m in settings.measures),
            "concurrency": settings.concurrency,
            "limits": {
                "wall_s": limits.wall_s,
                "cpu_s": limits.cpu_s,
                "memory_bytes": limits.memory_bytes,
                "file_bytes": limits.file_bytes,
                "open_files": limits.open_files,
            },
        },
    }


def evaluate_target(
    target: Target,
    datasets: Sequence[Dataset],
    out_dir: Path,
    *,
    limit: int | None = None,
    settings: Settings = Settings(),
    tokenizer_dir: Path | None = None,
    progress: bool = True,
) -> list[Path]:
    """Measure the first `limit` problems of each data set on `target`; one record file per data set.

    `datasets` are the whole sets (their digest is the run key, so a rerun with a larger `limit` resumes
    and adds problems). Returns the record files, `out_dir/<data set>.jsonl`.
    """
    from workbench.serving.client import server_version
    from workbench.stack.provenance import provenance

    root = Path(target.model_root) if target.model_root and Path(target.model_root).is_dir() else None
    stamp = provenance(
        recipe=target.recipe,
        url=target.url,
        model=target.model,
        server_version=server_version(target.url),
        model_dir=root,
    )
    paths = []
    with httpx.Client() as client:
        tokenizer = open_tokenizer(client, target, tokenizer_dir)
        context = _Context(client, target, tokenizer, settings)
        for dataset in datasets:
            store = RecordFile(store_path(out_dir, dataset))
            store.start(run_header(dataset, target, settings, tokenizer, stamp))
            evaluate_dataset(dataset.head(limit), store, context, progress=progress)
            paths.append(store.path)
    return paths


def default_out_dir(target: Target) -> Path:
    """runs/evaluate/<recipe name, else served model id> (`settings.run_dir`): a rerun resumes there."""
    from workbench.settings import run_dir

    label = target.recipe.name if target.recipe is not None else target.model
    return run_dir("evaluate", re.sub(r"[^A-Za-z0-9_.-]+", "_", label).strip("_") or "server")


def evaluate(
    server: Any,
    datasets: Sequence[str | Path | Dataset] = ("humaneval", "text"),
    out_dir: Path | str | None = None,
    *,
    limit: int | None = None,
    settings: Settings = Settings(),
    recipe: ServingRecipe | None = None,
    tokenizer_dir: Path | None = None,
    progress: bool = True,
) -> Path:
    """Evaluate `datasets` (names, files or Dataset objects) on a running `Server`; returns the output directory.

    For notebooks and scripts: `server` comes from `workbench.serving.server.connect(...)` (or `launch`),
    `out_dir` defaults to `default_out_dir`, and a rerun resumes. Read the results with
    `workbench.evaluate.report` (`summary_table`, `compare_runs`).
    """
    from workbench.evaluate.datasets import load_dataset

    loaded = [d if isinstance(d, Dataset) else load_dataset(d) for d in datasets]
    target = target_for(server, recipe)
    out = Path(out_dir) if out_dir else default_out_dir(target)
    evaluate_target(target, loaded, out, limit=limit, settings=settings, tokenizer_dir=tokenizer_dir, progress=progress)
    return out
