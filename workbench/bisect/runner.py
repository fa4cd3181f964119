"""Feature-by-feature enabling: baseline, each feature alone, then cumulatively, then interacting pairs.

docs/METHOD.md §7's method for "NotImplementedError" or a kernel that cannot be found, made automatic:

1. baseline, every feature off: it must start and answer, else the run stops with its crash class;
2. each feature alone on top of the baseline;
3. features cumulatively in the plan's recommended order;
4. when every feature passes alone but a cumulative step fails, the feature just added is paired with
   each one before it to name the interacting pair.

Each step starts a real server (its own log), asks the first request, compares greedy outputs on fixed
prompts with the baseline's (see `outputs`), stops the server, and is appended to `steps.jsonl` before
the next step starts. A rerun with the same output directory skips every step already recorded, so an
interrupted bisect resumes where it stopped. Two steps with the same feature set share one record.

With a device pool (`--parallel`, workbench.serving.device_groups) the "each feature alone" steps —
independent of each other — run at once, one server per device group; this thread alone appends the
records they hand back, so resuming works exactly as for a serial bisect.
"""

from __future__ import annotations

import enum
import hashlib
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from workbench import settings
from workbench.bisect.outputs import GreedyOutput, Match, compare_outputs, greedy_outputs
from workbench.bisect.plan import FeaturePlan, compose
from workbench.errors import WorkbenchError
from workbench.recipes import ServingRecipe
from workbench.results.jsonl import JsonlLog
from workbench.results.verdict import Verdict
from workbench.serving.client import server_version
from workbench.serving.crash import CrashReport, ServerFailure, false_ready
from workbench.serving.device_groups import DeviceGroup, DevicePool, group_size
from workbench.stack.provenance import provenance

STEPS_FILE = "steps.jsonl"


@dataclass(frozen=True)
class StepRecord:
    """What one configuration did. `features` is the set on top of the baseline (sorted)."""

    key: str
    kind: str  # baseline | alone | cumulative | pair | skipped
    features: tuple[str, ...]
    started: bool
    request_ok: bool
    match: str | None  # outputs.Match value, None when there were no outputs to compare
    max_drift: float | None
    detail: str
    crash_kind: str | None = None
    crash_summary: str | None = None
    fix: str | None = None
    log_excerpt: str | None = None
    log_path: str | None = None
    start_s: float = 0.0
    probe_s: float = 0.0
    finished_at: float = 0.0
    outputs: tuple[dict, ...] = ()
    provenance: dict = field(default_factory=dict)  # workbench.stack.provenance stamp: stack, recipe, model, server

    @property
    def passed(self) -> bool:
        if self.kind == "skipped":
            return True
        return self.started and self.request_ok and self.match is not None and Match(self.match).ok

    def row(self) -> dict:
        data = asdict(self)
        data.pop("outputs")
        data.pop("provenance")
        data["features"] = "+".join(self.features) or "(baseline)"
        data["passed"] = self.passed
        return data


class BisectStatus(str, enum.Enum):
    """How a bisect ended, in the bisect's own words; `verdict` puts it on the shared scale."""

    ALL_PASS = "all_pass"  # every feature passes alone and all together
    CULPRITS = "culprits"  # these features fail alone
    INTERACTION = "interaction"  # each passes alone, a combination fails
    BASELINE_FAILS = "baseline_fails"  # nothing to bisect: the baseline itself does not serve

    @property
    def verdict(self) -> BisectOutcome:
        return Verdict.PASS if self is BisectStatus.ALL_PASS else Verdict.ERROR


@dataclass(frozen=True)
class BisectOutcome:
    status: BisectStatus
    culprits: tuple[str, ...]
    message: str
    records: tuple[StepRecord, ...] = field(default=(), repr=False)

    @property
    def verdict(self) -> BisectOutcome:
        return self.status.verdict


def step_key(features: Sequence[str]) -> str:
    return "+".join(sorted(features)) or "baseline"


# ------------------------------------------------------------------------------------------- store
class StepStore:
    """The bisect's `JsonlLog` of step records, one line per finished step (see workbench.results.jsonl:
    a torn or damaged line is not a step, so that step simply runs again)."""

    def __init__(self, out_dir: Path) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        self.path = out_dir / STEPS_FILE
        self._log = JsonlLog(self.path)

    def load(self) -> dict[str, StepRecord]:
        return {record.key: record for record in self._log.read(_step_record).records}

    def append(self, record: StepRecord) -> None:
        self._log.append(asdict(record))


def _step_record(raw: dict) -> StepRecord:
    return StepRecord(**{**raw, "features": tuple(raw["features"]), "outputs": tuple(raw.get("outputs", ()))})


# ------------------------------------------------------------------------------------------- probe
ProbeFn = Callable[[ServingRecipe, str, tuple[str, ...], str, Path], StepRecord]


def probe_with_server(plan: FeaturePlan, *, startup_timeout_s: float | None = None, progress: bool = False) -> ProbeFn:
    """A probe that launches `recipe` for real (in `group` when given), asks the greedy outputs, stops it."""
    from workbench.serving import server as server_mod

    def probe(
        recipe: ServingRecipe,
        kind: str,
        features: tuple[str, ...],
        key: str,
        log_dir: Path,
        group: DeviceGroup | None = None,
    ) -> StepRecord:
        started_at = time.perf_counter()
        try:
            launch = server_mod.plan_launch(
                recipe, log_dir=log_dir / key, startup_timeout_s=startup_timeout_s, group=group
            )
            server = server_mod.start(launch, progress=progress)
        except ServerFailure as failure:
            return _failed(key, kind, features, failure.report, started=False, start_s=time.perf_counter() - started_at)
        start_s = time.perf_counter() - started_at
        with server:
            probe_at = time.perf_counter()
            try:
                with httpx.Client(timeout=120.0) as client:
                    outputs = greedy_outputs(
                        client,
                        server.url,
                        server.model,
                        plan.compare.prompts,
                        plan.compare.max_tokens,
                        plan.compare.top_logprobs,
                    )
            except (httpx.HTTPError, KeyError, ValueError, TypeError) as exc:
                report = server.diagnose(wait_s=server_mod.AFTER_FAILED_REQUESTS_S) or false_ready(
                    f"{type(exc).__name__}: {exc}", server.log_text(), server.log_path
                )
                return _failed(
                    key, kind, features, report, started=True, start_s=start_s, probe_s=time.perf_counter() - probe_at
                )
            return StepRecord(
                key,
                kind,
                features,
                True,
                True,
                None,
                None,
                "answered",
                start_s=start_s,
                probe_s=time.perf_counter() - probe_at,
                finished_at=time.time(),
                log_path=str(server.log_path) if server.log_path else None,
                outputs=tuple(o.to_dict() for o in outputs),
                provenance=provenance(
                    recipe=recipe, url=server.url, model=server.model, server_version=server_version(server.url)
                ),
            )

    return probe


def _failed(
    key: str,
    kind: str,
    features: tuple[str, ...],
    report: CrashReport,
    *,
    started: bool,
    start_s: float,
    probe_s: float = 0.0,
) -> StepRecord:
    return StepRecord(
        key,
        kind,
        features,
        started,
        False,
        None,
        None,
        report.summary,
        crash_kind=report.kind.value,
        crash_summary=report.summary,
        fix=report.fix,
        log_excerpt="\n".join(report.evidence)[:2000] or None,
        log_path=str(report.log_path) if report.log_path else None,
        start_s=start_s,
        probe_s=probe_s,
        finished_at=time.time(),
    )


# ------------------------------------------------------------------------------------------- run
class Bisect:
    """One bisect: a recipe, a plan, an output directory; `run()` returns the verdict."""

    def __init__(
        self,
        recipe: ServingRecipe,
        plan: FeaturePlan,
        out_dir: Path,
        probe: ProbeFn | None = None,
        on_step: Callable[[StepRecord], None] | None = None,
        pool: DevicePool | None = None,
    ) -> None:
        self.recipe, self.plan, self.out_dir = recipe, plan, out_dir
        self.store = StepStore(out_dir)
        self.probe = probe or probe_with_server(plan)
        self.on_step = on_step
        self.pool = pool  # set: the alone steps run at once, one per device group (the probe takes `group=`)
        self.records = self.store.load()
        self._baseline_outputs: list[GreedyOutput] | None = None

    def planned_steps(self) -> list[tuple[str, tuple[str, ...]]]:
        """(kind, features) for baseline, alone and cumulative steps (pairs are decided later)."""
        ordered = [f.name for f in self.plan.ordered()]
        steps = [("baseline", ())] + [("alone", (n,)) for n in ordered]
        steps += [("cumulative", tuple(ordered[: i + 1])) for i in range(1, len(ordered))]
        return steps

    def run(self, progress: bool = True) -> BisectOutcome:
        from tqdm.auto import tqdm

        steps = self.planned_steps()
        bar = tqdm(total=len(steps), desc="bisect", unit="step", disable=not progress)
        try:
            baseline = self._step("baseline", (), bar)
            if not baseline.passed:
                return self._verdict_baseline(baseline)
            self._baseline_outputs = [GreedyOutput.from_dict(o) for o in baseline.outputs]
            if self.pool is not None:
                self._alone_in_parallel(bar)
            alone = {n: self._step("alone", (n,), bar) for n in self.plan.order}
            failing = [n for n, r in alone.items() if not r.passed]
            if failing:
                bar.update(bar.total - bar.n)
                return BisectOutcome(
                    BisectStatus.CULPRITS, tuple(failing), self._culprit_message(failing, alone), self._all()
                )
            usable = [n for n in self.plan.order if alone[n].kind != "skipped"]
            for i in range(1, len(usable)):
                record = self._step("cumulative", tuple(usable[: i + 1]), bar)
                if not record.passed:
                    bar.update(bar.total - bar.n)
                    return self._narrow(usable[: i + 1], record)
            bar.update(bar.total - bar.n)
            return BisectOutcome(BisectStatus.ALL_PASS, (), "every feature passes alone and all together", self._all())
        finally:
            bar.close()

    # -------------------------------------------------------------- steps
    def _step(self, kind: str, features: tuple[str, ...], bar) -> StepRecord:
        key = step_key(features)
        bar.set_postfix_str(key)
        record = self.records.get(key)
        if record is None:
            record = self._skip_record(key, features)
            if record is None:
                recipe = self._recipe(features)
                record = self._finish(recipe, self.probe(recipe, kind, features, key, self.out_dir / "logs"))
            self._keep(record)
        bar.update(1)
        if self.on_step:
            self.on_step(record)
        return record

    def _skip_record(self, key: str, features: tuple[str, ...]) -> StepRecord | None:
        """A 'skipped' record when a feature is unsupported or forced by the platform, else None."""
        specs = [self.plan.feature(n) for n in features]
        unsupported = [s for s in specs if not s.supported]
        forced = [s for s in specs if s.forced_by]
        if unsupported:
            s = unsupported[0]
            return StepRecord(
                key,
                "skipped",
                features,
                False,
                False,
                None,
                None,
                f"{s.name} unsupported on this target: {s.unsupported_reason}",
                finished_at=time.time(),
            )
        if forced:
            s = forced[0]
            return StepRecord(
                key,
                "skipped",
                features,
                False,
                False,
                None,
                None,
                f"{s.name} is forced by the platform, not a switch: {s.forced_reason} ({s.forced_by})",
                finished_at=time.time(),
            )
        return None

    def _recipe(self, features: tuple[str, ...]) -> ServingRecipe:
        return compose(self.recipe, self.plan.baseline, [self.plan.feature(n) for n in features])

    def _finish(self, recipe: ServingRecipe, record: StepRecord) -> StepRecord:
        """Judge a probed record against the baseline and stamp it (a step that reached no server: the recipe)."""
        record = self._judge(record)
        return record if record.provenance else _replace(record, provenance=provenance(recipe=recipe))

    def _keep(self, record: StepRecord) -> None:
        """Append to steps.jsonl and remember: only ever called from the bisect's own thread (one writer)."""
        self.store.append(record)
        self.records[record.key] = record

    def _alone_in_parallel(self, bar) -> None:
        """Probe every alone step not yet recorded at once, one server per free device group of the pool.

        Worker threads only probe; each record comes back through a queue and is judged and appended
        here. `_step` then finds them recorded and reports them in the plan's order.
        """
        todo = [
            (n,)
            for n in self.plan.order
            if step_key((n,)) not in self.records and self._skip_record(step_key((n,)), (n,)) is None
        ]
        recipes = {features: self._recipe(features) for features in todo}
        self.pool.check_fits(list(recipes.values()))
        done: queue.Queue = queue.Queue()

        def work(features: tuple[str, ...], group: DeviceGroup) -> None:
            try:
                record = self.probe(
                    recipes[features], "alone", features, step_key(features), self.out_dir / "logs", group=group
                )
                done.put((features, group, record, None))
            except BaseException as exc:  # handed to this thread, which re-raises it
                done.put((features, group, None, exc))

        running, error = 0, None
        while todo or running:
            while todo and error is None and (group := self.pool.acquire(group_size(recipes[todo[0]]))):
                threading.Thread(target=work, args=(todo.pop(0), group), daemon=True).start()
                running += 1
            bar.set_postfix_str(f"{running} alone steps at once")
            features, group, record, exc = done.get()
            self.pool.release(group)
            running -= 1
            if exc is not None:
                error, todo = error or exc, []
            else:
                self._keep(self._finish(recipes[features], record))
        if error is not None:
            raise error

    def _judge(self, record: StepRecord) -> StepRecord:
        """Fill in the output comparison against the baseline (the baseline matches itself)."""
        if not (record.started and record.request_ok):
            return record
        outputs = [GreedyOutput.from_dict(o) for o in record.outputs]
        if record.kind == "baseline" or self._baseline_outputs is None:
            nan = any(lp != lp for o in outputs for lp in o.logprobs)
            match = Match.NAN if nan else Match.EXACT
            return _replace(
                record, match=match.value, max_drift=0.0, detail="baseline outputs" if not nan else "NaN logprobs"
            )
        cmp = compare_outputs(self._baseline_outputs, outputs, self.plan.compare.logprob_tolerance)
        return _replace(record, match=cmp.match.value, max_drift=cmp.max_drift, detail=cmp.detail)

    def _narrow(self, cumulative: Sequence[str], failed: StepRecord) -> BisectOutcome:
        added = cumulative[-1]
        pairs = []
        for other in cumulative[:-1]:
            pair = tuple(sorted((other, added)))
            record = self._step("pair", pair, _NullBar())
            if not record.passed:
                pairs.append(pair)
        if pairs:
            names = tuple(sorted({n for p in pairs for n in p}))
            detail = "; ".join(f"{a} + {b}" for a, b in pairs)
            return BisectOutcome(
                BisectStatus.INTERACTION,
                names,
                f"each feature passes alone, but together they fail: {detail}. "
                f"{_failure_text(self.records[step_key(pairs[0])])}",
                self._all(),
            )
        return BisectOutcome(
            BisectStatus.INTERACTION,
            tuple(cumulative),
            f"each feature and every pair with {added} passes, but the set {'+'.join(cumulative)} fails "
            f"(3 or more interact). {_failure_text(failed)}",
            self._all(),
        )

    def _culprit_message(self, failing: Sequence[str], alone: dict[str, StepRecord]) -> str:
        return " ".join(f"{n}: {_failure_text(alone[n])}" for n in failing)

    def _verdict_baseline(self, record: StepRecord) -> BisectOutcome:
        return BisectOutcome(
            BisectStatus.BASELINE_FAILS,
            (),
            "the baseline (every feature off) does not work, so no feature can be blamed yet: " + _failure_text(record),
            self._all(),
        )

    def _all(self) -> tuple[StepRecord, ...]:
        return tuple(self.records.values())


class _NullBar:
    total = n = 0

    def set_postfix_str(self, _text: str) -> None: ...

    def update(self, _n: int) -> None: ...


def _replace(record: StepRecord, **changes) -> StepRecord:
    data = asdict(record)
    data.update(changes)
    data["features"] = tuple(data["features"])
    data["outputs"] = tuple(data["outputs"])
    return StepRecord(**data)


def _failure_text(record: StepRecord) -> str:
    if not record.started:
        return f"does not start [{record.crash_kind}] {record.crash_summary}; fix: {record.fix}"
    if not record.request_ok:
        return f"starts but the first request fails [{record.crash_kind}] {record.crash_summary}; fix: {record.fix}"
    if record.match is not None and not Match(record.match).ok:
        return f"runs but answers differently from the baseline ({record.match}: {record.detail})"
    return "passes"


def recipe_fingerprint(recipe: ServingRecipe, plan: FeaturePlan) -> str:
    """Guards resumption: a different recipe or plan must not reuse old steps."""
    text = recipe.model_dump_json(exclude={"source"}) + plan.model_dump_json(exclude={"source"})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def default_out_dir(recipe: ServingRecipe, plan: FeaturePlan) -> Path:
    """Where a bisect of `recipe` with `plan` writes unless told otherwise: the same folder for the same
    recipe and plan, so the CLI and the notebook both resume by default, and a different plan never
    collides with old steps. Example: runs/bisect/cpu-tiny-1a2b3c4d."""
    return settings.run_dir("bisect", f"{recipe.name}-{recipe_fingerprint(recipe, plan)[:8]}")


def check_resumable(out_dir: Path, fingerprint: str) -> None:
    """Write the fingerprint on first use; refuse to mix steps of another recipe or plan."""
    out_dir.mkdir(parents=True, exist_ok=True)
    marker = out_dir / "fingerprint.txt"
    if marker.exists() and marker.read_text().strip() != fingerprint:
        raise WorkbenchError(
            f"{out_dir} holds a bisect of a different recipe or feature plan; use another --out directory "
            "(or delete that one to start over)"
        )
    marker.write_text(fingerprint)
