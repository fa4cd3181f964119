"""The token stage of a twin run: both sides' generations (and side A's repeat), the comparison, the verdict.

    result = compare_sides(side_a, side_b, "text", out=Path("runs/twin/tp"), settings=TwinSettings(32))

`workbench.twin.api.run_twin` calls it and then decides on the module stage (`locate`); this module owns the
result type both stages fill and the `twin.json` it is saved as.

Order of work, each step saved before the next starts:
1. `plan.json`: the sides, the prompts as token ids (tokenized once, by side A's server or --tokenizer),
   the settings; a rerun with the same --out resumes and refuses a different plan;
2. side A's server: its generations (`A.jsonl`), then `noise_repeats` repeats (`A.noise1.jsonl` ...): the
   same prompts in the same batches on the same server, which measures the configuration's run-to-run noise;
3. side B's server (the same one when B runs A's configuration, e.g. a batch twin): `B.jsonl`;
4. `twin.json`: per-prompt divergences, the summary of each pair, the verdict and the reproducibility
   record, with the provenance stamp.
Servers start one after the other through the one launcher (`workbench.serving.server.connect`), each
stopped before the next starts (or leased from the engine pool inside the main job and the tests), so the
two sides never compete for the same cores or device memory. A side whose log is complete is not
started again on a resume.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pandas as pd

from workbench.errors import WorkbenchError
from workbench.evaluate.datasets import Dataset, load_dataset
from workbench.evaluate.endpoints import LocalTokenizer, ServerTokenizer, has_tokenize_endpoint
from workbench.evaluate.nll import tokenize_problem
from workbench.results.envelope import DocumentKind, write_result
from workbench.results.files import write_json
from workbench.results.jsonl import JsonlLog
from workbench.results.verdict import Verdict
from workbench.serving.guard import GuardSummary, check_tokens
from workbench.serving.server import Server, connect
from workbench.settings import run_dir
from workbench.stack.provenance import provenance
from workbench.twin import determinism
from workbench.twin.collect import CollectSettings, collect
from workbench.twin.diverge import Outcome, PromptDivergence
from workbench.twin.generation import Generation
from workbench.twin.located import LocateResult
from workbench.twin.policy import TwinThresholds, load_thresholds
from workbench.twin.report import (
    PairSummary,
    TwinVerdict,
    compare_runs,
    effective_tie_tolerance,
    judge,
    prompt_table,
    summarize,
    summary_table,
)
from workbench.twin.sides import Side, same_server

TWIN_KIND = DocumentKind("twin")

PLAN_FILE = "plan.json"
RESULT_FILE = "twin.json"
PLAN_VERSION = 1


@dataclass(frozen=True)
class TwinSettings:
    """What both sides are asked (the per-side batch lives on each `Side`)."""

    max_tokens: int = 32
    top_logprobs: int = 5
    seed: int = 0
    noise_repeats: int = 1

    def __post_init__(self) -> None:
        if self.noise_repeats < 0:
            raise WorkbenchError(f"--noise-repeats {self.noise_repeats}: 0 (no noise run) or more")
        CollectSettings(self.max_tokens, self.top_logprobs, 1, self.seed)  # refuses bad values, naming the flag

    def for_side(self, side: Side) -> CollectSettings:
        return CollectSettings(self.max_tokens, self.top_logprobs, side.batch, self.seed)


@dataclass(frozen=True)
class TwinResult:
    """A finished twin run (see the module docstring); `rows` is A vs B, prompt by prompt."""

    directory: Path
    sides: tuple[Side, Side]
    prompt_names: tuple[str, ...]
    prompt_tokens: tuple[tuple[int, ...], ...]
    rows: tuple[PromptDivergence, ...]
    pair: PairSummary
    noise: PairSummary | None
    verdict: TwinVerdict
    reproducibility: dict[str, Any]
    notes: tuple[str, ...]
    settings: TwinSettings
    wall_s: float
    located: LocateResult | None = field(default=None, compare=False)  # the module stage, when it ran
    module_stage: str | None = None  # why the module stage did not run, when it was wanted

    def prompt_table(self) -> pd.DataFrame:
        return prompt_table(self.rows, self.prompt_names)

    def summary_table(self) -> pd.DataFrame:
        pairs = ([(self.noise, None)] if self.noise else []) + [(self.pair, self.verdict)]
        return summary_table(pairs)

    def first_divergence(self, *, near_ties: bool = False) -> PromptDivergence | None:
        """The earliest-diverging prompt beyond the tie tolerance (or at a near tie, with `near_ties`)."""
        wanted = {Outcome.DIVERGED} | ({Outcome.NEAR_TIE} if near_ties else set())
        found = [r for r in self.rows if r.outcome in wanted]
        return min(found, key=lambda r: (r.position or 0, r.prompt)) if found else None

    def text(self) -> str:
        a, b = self.sides
        shape = f"{self.pair.prompts} prompts x {self.settings.max_tokens} tokens, top-{self.settings.top_logprobs}"
        lines = [f"twin run {self.directory}", f"  A: {a.describe()}", f"  B: {b.describe()}"]
        lines.append(f"  {shape} logprobs; tie tolerance {self.pair.tie_tolerance:.3g} nats")
        if self.noise is not None:
            lines.append(
                f"  noise (A vs its repeat): {self.noise.identical}/{self.noise.prompts} identical, "
                f"{self.noise.diverged + self.noise.near_ties} diverged, max drift {self.noise.max_drift:.3g} nats"
            )
        columns = ["prompt", "id", "outcome", "position", "token_a", "token_b", "gap", "drift"]
        table = self.prompt_table()[columns]
        shown = table.astype(object).where(table.notna(), "-")
        for column in ("gap", "drift"):
            shown[column] = [v if v == "-" else f"{v:.3g}" for v in shown[column]]
        lines.append(shown.to_string(index=False))
        lines.append(f"verdict: {self.verdict.verdict.value}")
        lines += [f"  - {reason}" for reason in self.verdict.reasons]
        lines += [f"note: {note}" for note in self.notes]
        if self.located is not None:
            lines.append(self.located.text())
        elif self.module_stage:
            lines.append(f"module stage skipped: {self.module_stage}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sides": [s.to_dict() for s in self.sides],
            "settings": vars(self.settings),
            "summary": self.pair.to_dict(),
            "noise": self.noise.to_dict() if self.noise else None,
            "verdict": self.verdict.to_dict(),
            "prompts": [r.row() | {"id": self.prompt_names[r.prompt]} for r in self.rows],
            "reproducibility": self.reproducibility,
            "notes": list(self.notes),
            "wall_s": self.wall_s,
            "locate": self.located.to_dict() if self.located is not None else None,
            "module_stage": self.module_stage,
        }

    def write(self) -> Path:
        a = self.sides[0]
        stamp = provenance(recipe=a.recipe, url=a.url)
        return write_result(self.directory / RESULT_FILE, self.to_dict(), stamp, TWIN_KIND)


# -- the plan: what a resume must find unchanged --------------------------------------------------------


def _identity(sides: tuple[Side, Side], dataset: Dataset, settings: TwinSettings) -> dict[str, Any]:
    return {
        "sides": [s.identity() for s in sides],
        "dataset": dataset.name,
        "digest": dataset.digest,
        "prompts": len(dataset),
        "settings": vars(settings),
    }


def _read_plan(directory: Path, wanted: dict[str, Any]) -> dict[str, Any] | None:
    path = directory / PLAN_FILE
    if not path.is_file():
        if directory.is_dir() and any(directory.iterdir()):
            raise WorkbenchError(
                f"{directory} holds files but no {PLAN_FILE}: it is not a twin run; choose a new --out"
            )
        return None
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise WorkbenchError(
            f"{path} is unreadable ({exc}); choose a new --out (the logs beside it are kept)"
        ) from None
    if plan.get("identity") != wanted:
        changed = sorted(k for k in wanted if plan.get("identity", {}).get(k) != wanted[k])
        raise WorkbenchError(
            f"{directory} holds a twin run of another plan (changed: {', '.join(changed)}); choose a new --out, or "
            "rerun with the settings it was started with to resume it"
        )
    return plan


def _tokenize(dataset: Dataset, server: Server, tokenizer_dir: Path | None) -> list[tuple[int, ...]]:
    """Every prompt's token ids, by the server's own /tokenize (or a local tokenizer directory)."""
    with httpx.Client() as client:
        if tokenizer_dir is None and has_tokenize_endpoint(client, server.url, server.model):
            tokenizer: Any = ServerTokenizer(client, server.url, server.model)
        elif tokenizer_dir is not None:
            tokenizer = LocalTokenizer(Path(tokenizer_dir))
        else:
            raise WorkbenchError(
                f"{server.url} has no /tokenize endpoint; pass --tokenizer DIR (the model's tokenizer files) so both "
                "sides get exactly the same token ids"
            )
        return [tokenize_problem(problem, tokenizer).prompt_ids for problem in dataset.problems]


def _check_lengths(tokens: Sequence[Sequence[int]], names: Sequence[str], sides: Sequence[Side], max_tokens: int):
    limits = [s.recipe.max_model_len for s in sides if s.recipe is not None and s.recipe.max_model_len]
    if not limits:
        return
    limit = min(limits)
    too_long = [(n, len(t)) for n, t in zip(names, tokens, strict=True) if len(t) + max_tokens > limit]
    if too_long:
        name, length = too_long[0]
        raise WorkbenchError(
            f"{len(too_long)} prompts do not fit max_model_len {limit} with --max-tokens {max_tokens} (e.g. {name}: "
            f"{length} tokens); lower --max-tokens or --num-prompts, or raise the recipes' max_model_len"
        )


# -- running the sides ---------------------------------------------------------------------------------


def _log(directory: Path, run: str) -> JsonlLog:
    return JsonlLog(directory / f"{run}.jsonl")


def _complete(directory: Path, run: str, count: int) -> bool:
    done = {g.prompt for g in _log(directory, run).read(Generation.from_dict).records if not g.failed}
    return len(done) == count


@contextlib.contextmanager
def _server(side: Side, launch: Mapping[str, Any], progress: bool) -> Iterator[Server]:
    if side.url is not None:
        with connect(url=side.url, progress=progress) as server:
            yield server
    else:
        with connect(recipe=side.recipe, progress=progress, **launch) as server:
            yield server


def compare_sides(
    side_a: Side,
    side_b: Side,
    prompts: str | Path = "text",
    *,
    out: Path | None = None,
    num_prompts: int | None = None,
    settings: TwinSettings = TwinSettings(),
    thresholds: str | Path | TwinThresholds | None = None,
    tokenizer: Path | None = None,
    extra_env: Mapping[str, str] | None = None,
    extra_args: tuple[str, ...] = (),
    progress: bool = True,
) -> TwinResult:
    """Run `prompts` (a data set name or JSONL file, as `evaluate --dataset`) on both sides and judge them."""
    began = time.monotonic()
    policy = thresholds if isinstance(thresholds, TwinThresholds) else load_thresholds(thresholds)
    dataset = load_dataset(prompts, limit=num_prompts)
    sides = (side_a, side_b)
    directory = Path(out) if out is not None else run_dir("twin", fresh=True)
    wanted = _identity(sides, dataset, settings)
    plan = _read_plan(directory, wanted)
    tokens = [tuple(p["token_ids"]) for p in plan["prompts"]] if plan else None
    names = tuple(p.id for p in dataset.problems)
    launch = {"extra_env": dict(extra_env or {}), "extra_args": tuple(extra_args)}
    runs = {"A": ["A", *(f"A.noise{r}" for r in range(1, settings.noise_repeats + 1))], "B": ["B"]}
    records: dict[str, Any] = dict(plan.get("reproducibility", {})) if plan else {}
    plan = _Plan(directory, sides, dataset, runs, settings, wanted, records, launch, tokenizer)
    tokens = _collect_sides(plan, tokens, progress)
    read = {r: _log(directory, r).read(Generation.from_dict).records for rs in runs.values() for r in rs}
    result = _judge(directory, sides, names, tokens, read, runs, settings, policy, records, began)
    result.write()
    return result


@dataclass(frozen=True)
class _Plan:
    """What `_collect_sides` needs to know about the run (private)."""

    directory: Path
    sides: tuple[Side, Side]
    dataset: Dataset
    runs: dict[str, list[str]]
    settings: TwinSettings
    wanted: dict[str, Any]
    records: dict[str, Any]
    launch: dict[str, Any]
    tokenizer: Path | None


def _collect_sides(plan: _Plan, tokens: list[tuple[int, ...]] | None, progress: bool) -> list[tuple[int, ...]]:
    """Every run's generations, one server at a time (one for both sides when they run the same configuration);
    runs already complete are skipped, and so is a server with nothing left to do. Returns the prompts' tokens."""
    side_a, side_b = plan.sides
    names = tuple(p.id for p in plan.dataset.problems)
    groups = [[side_a, side_b]] if same_server(side_a, side_b) else [[side_a], [side_b]]
    for group in groups:
        done = [r for s in group for r in plan.runs[s.label] if tokens and _complete(plan.directory, r, len(tokens))]
        pending = [(s, r) for s in group for r in plan.runs[s.label] if r not in done]
        if not pending:
            continue
        with _server(group[0], plan.launch, progress) as server:
            if tokens is None:
                tokens = _tokenize(plan.dataset, server, plan.tokenizer)
                _check_lengths(tokens, names, plan.sides, plan.settings.max_tokens)
                plan.directory.mkdir(parents=True, exist_ok=True)
            for side in group:
                env = dict(server.plan.env) if server.plan is not None else None
                plan.records[side.label] = determinism.side_record(side, env, plan.settings.seed)
            _write_plan(plan, names, tokens)
            for side, run in pending:
                log = _log(plan.directory, run)
                settings = plan.settings.for_side(side)
                collect(server.url, server.model, tokens, settings, log, label=run, progress=progress)
    assert tokens is not None  # every run was complete, so the plan held the tokens
    return tokens


def _write_plan(plan: _Plan, names: Sequence[str], tokens: Sequence[Sequence[int]]) -> None:
    prompts = [{"id": n, "token_ids": list(t)} for n, t in zip(names, tokens, strict=True)]
    document = {
        "version": PLAN_VERSION,
        "identity": plan.wanted,
        "sides": [s.to_dict() for s in plan.sides],
        "prompts": prompts,
        "settings": vars(plan.settings),
        "reproducibility": plan.records,
    }
    write_json(plan.directory / PLAN_FILE, document)


def _latest(records: Sequence[Generation]) -> list[Generation]:
    """One generation per prompt: the last line written for it (a retried failure is written again)."""
    return list({g.prompt: g for g in records}.values())


def _judge(directory, sides, names, tokens, read, runs, settings, policy, records, began) -> TwinResult:
    a = _latest(read["A"])
    noises = [compare_runs(a, _latest(read[r]), policy.tie_tolerance_nats) for r in runs["A"][1:]]
    noise = None
    if noises:
        tolerance = policy.tie_tolerance_nats
        summaries = [summarize(rows, f"A vs A (repeat {i + 1})", tolerance) for i, rows in enumerate(noises)]
        noise = max(summaries, key=lambda s: (s.diverged + s.near_ties, s.max_drift))  # the noisiest repeat
    tie = effective_tie_tolerance(policy, noise)
    rows = compare_runs(a, _latest(read["B"]), tie)
    pair = summarize(rows, "A vs B", tie)
    verdict = judge(pair, noise, policy)
    notes = determinism.notes(sides, records)
    for label in ("A", "B"):  # the output guard on each side's answers (workbench.serving.guard): NaN, empty, loops
        guard = GuardSummary.of([check_tokens(g.token_ids, g.logprobs) for g in _latest(read[label]) if not g.failed])
        notes += [f"side {label} {guard.line()}"] if guard.flagged else []
    if pair.prompts < len(tokens):
        notes.append(f"{len(tokens) - pair.prompts} prompts were not answered by both sides")
    reproducibility = {"sides": records, "prompt_order": "as listed; batches are consecutive prompts"}
    return TwinResult(
        directory=directory,
        sides=sides,
        prompt_names=names,
        prompt_tokens=tuple(tokens),
        rows=tuple(rows),
        pair=pair,
        noise=noise,
        verdict=verdict,
        reproducibility=reproducibility,
        notes=tuple(notes),
        settings=settings,
        wall_s=round(time.monotonic() - began, 2),
    )


def read_twin(directory: str | Path) -> dict[str, Any]:
    """A finished run's `twin.json` (checked to be a twin result), for notebooks and reports."""
    path = Path(directory) / RESULT_FILE
    if not path.is_file():
        raise WorkbenchError(f"{directory} holds no {RESULT_FILE}: run (or resume) the twin run first")
    return TWIN_KIND.read(path)


def verdict_of(result: TwinResult) -> Verdict:
    return result.verdict.verdict


__all__ = ["TWIN_KIND", "TwinResult", "TwinSettings", "compare_sides", "read_twin", "verdict_of"]
