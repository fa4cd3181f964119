"""The quantization autopilot: which units to keep in float for an accuracy budget, found and proven.

    result = run_autopilot(AutoRequest("smollm2", budget=1.0))          # `quantize --auto --budget 1`
    print(result.text()); result.to_dict()                               # the plan, per module

Steps (docs/METHOD.md §13), each measurement stored as it is made (`evalcache`), so a rerun with the same
settings resumes where it stopped:

1. calibrate the float model in the executor (input ranges, for static W8A8 and the proxies);
2. build the dev and test splits (`texts`), disjoint, from the data sets;
3. rank the rollback units by the sensitivity proxy, for the ladder's cheapest rung (`sensitivity`);
4. the noise floor: the float model twice on the evaluating engine, dev split; if the spread (the
   larger end of the float-vs-float interval) is more than `noise_fraction` of the budget, refuse --
   the engine cannot resolve such a budget;
5. the rollback search on the dev split (`search.rollback_search`), about log2(units) + 1 evaluations;
6. the verdict on the held-out test split: the plan holds when the upper end of its 95% interval of NLL
   rise over the float model is within the budget; otherwise it "fails on the held-out split", and an
   infeasible search says so with the best plan it measured.

The plan (scheme per module, the modules kept in float, every step) is written to `plan.json` in the
state directory, and the checkpoint to `out` when asked (msmodelslim or compressed-tensors).
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from ascend_backend.quantization import QuantFormat
from ascend_backend.quantization.scheme import PlanScheme
from ascend_backend.quantization.units import RollbackUnit, expand
from workbench.errors import WorkbenchError
from workbench.quantize import sensitivity, texts
from workbench.quantize.evalcache import EvalCache, digest
from workbench.quantize.evaluators import Evaluator, ExecutorEvaluator, Losses, ServedEvaluator
from workbench.quantize.plan_model import PlanModel
from workbench.quantize.policy import AutopilotPolicy, load_policy
from workbench.quantize.search import SearchOutcome, Step, UnitPlan, check_ladder, rollback_search
from workbench.quantize.stats import Rise, nll_rise
from workbench.results.envelope import DocumentKind, write_result
from workbench.stack.provenance import provenance

AUTOPILOT_KIND = DocumentKind("quantize-auto")  # plan.json of `quantize --auto`: the plan and every step

PLAN_FILE = "plan.json"
SENSITIVITY_FILE = "sensitivity.csv"
EMBEDDED_RECIPES = {"tiny": "cpu-tiny", "smollm2": "cpu-smollm2"}
DEFAULT_LADDERS = {
    "served": (PlanScheme.W8A8_DYNAMIC, PlanScheme.FLOAT),  # what vLLM's CPU int8 path serves at speed
    "executor": (PlanScheme.W8A8, PlanScheme.W8A8_DYNAMIC, PlanScheme.FLOAT),
}


class Outcome(str, enum.Enum):
    HOLDS = "holds"  # the budget holds on the held-out split, at the interval's upper end
    FAILS_ON_TEST = "fails-on-test"  # found on dev, but the held-out interval crosses the budget
    INFEASIBLE = "infeasible"  # no plan within the float cap holds on dev: the best measured is returned
    REFUSED = "refused"  # the engine's own noise is too large for this budget: no search was run


@dataclass(frozen=True)
class AutoRequest:
    model: str  # tiny, smollm2 or a float checkpoint directory
    budget: float = 1.0  # percent rise of the NLL per scored token over the float model
    evaluator: str = "served"  # served | executor
    recipe: str | None = None  # the float serving recipe (served); default: the embedded model's cpu recipe
    ladder: tuple[PlanScheme, ...] = ()  # cheapest first, FLOAT last; default per evaluator
    proxy: str = sensitivity.DEFAULT_PROXY
    datasets: tuple[str, ...] = texts.DEFAULT_DATASETS
    limit: int | None = 24  # problems per data set (half dev, half test)
    target: texts.Target = texts.Target.REFERENCE
    max_float: int | None = None  # units allowed in float; default: policy max_float_fraction of them
    calibration_samples: int = 16
    max_tokens: int = 384  # per scored text
    group_size: int = 32  # of the 4-bit schemes (W4A16, W4A8_DYNAMIC)
    state_dir: Path | None = None  # where measurements are kept; default runs/quantize-auto/<model>-<settings>
    out: Path | None = None  # write the plan's checkpoint here
    format: QuantFormat = QuantFormat.COMPRESSED_TENSORS
    policy: str | None = None  # policy file (default policy/quantize/autopilot.yaml)

    def __post_init__(self) -> None:
        if not self.budget > 0:
            raise WorkbenchError(f"--budget {self.budget}: give a positive percent, e.g. --budget 1")
        if self.evaluator not in DEFAULT_LADDERS:
            raise WorkbenchError(f"--evaluator {self.evaluator!r}: choose served or executor")
        if self.proxy not in sensitivity.PROXIES:
            raise WorkbenchError(f"--proxy {self.proxy!r}: choose one of {', '.join(sensitivity.PROXIES)}")

    @property
    def rungs(self) -> tuple[PlanScheme, ...]:
        return self.ladder or DEFAULT_LADDERS[self.evaluator]

    def settings_key(self) -> str:
        data = {
            k: (str(v) if isinstance(v, (Path, enum.Enum)) else v)
            for k, v in dataclasses.asdict(self).items()
            if k not in ("state_dir", "out", "format")
        }
        data["ladder"] = [s.value for s in self.rungs]
        return digest(data)


@dataclass(frozen=True)
class AutoResult:
    outcome: Outcome
    message: str
    budget: float
    units: dict[str, str]  # unit -> scheme
    modules: dict[str, str]  # module prefix -> scheme
    order: list[str]  # units, most sensitive first by `proxy`
    proxy: str
    measured: str  # served | executor | fake-quant
    noise: Rise
    dev: Rise | None
    test: Rise | None
    steps: tuple[Step, ...]
    evaluations: int  # every plan evaluation: noise floor, search, verdict
    seconds: float
    splits: dict[str, Any]
    state_dir: Path
    checkpoint: Path | None = None
    sensitivity: dict[str, float] = field(default_factory=dict)
    model: str = ""  # the request's model (tiny, smollm2 or a directory)
    unit_list: tuple[RollbackUnit, ...] = ()  # the model's units, for serving the plan (not in to_dict)
    scored: texts.Splits | None = None  # the dev and test texts (not in to_dict)

    @property
    def float_modules(self) -> list[str]:
        return [m for m, s in self.modules.items() if s == PlanScheme.FLOAT.value]

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value,
            "message": self.message,
            "budget_pct": self.budget,
            "measured": self.measured,
            "proxy": self.proxy,
            "modules": self.modules,
            "float_modules": self.float_modules,
            "units": self.units,
            "order": self.order,
            "noise_floor": self.noise.to_dict(),
            "dev": self.dev.to_dict() if self.dev else None,
            "test": self.test.to_dict() if self.test else None,
            "steps": [s.to_dict() for s in self.steps],
            "evaluations": self.evaluations,
            "seconds": round(self.seconds, 1),
            "splits": self.splits,
            "state_dir": str(self.state_dir),
            "checkpoint": str(self.checkpoint) if self.checkpoint else None,
            "sensitivity": self.sensitivity,
            "model": self.model,
        }

    def text(self) -> str:
        counts: dict[str, int] = {}
        for scheme in self.modules.values():
            counts[scheme] = counts.get(scheme, 0) + 1
        kept = [u for u, s in self.units.items() if s == PlanScheme.FLOAT.value]
        lines = [
            f"{self.outcome.value}: {self.message}",
            f"plan: {', '.join(f'{n} {k}' for k, n in sorted(counts.items()))} linears; "
            f"units kept in float: {', '.join(kept) or 'none'}",
            f"noise floor (float vs float, dev): {self.noise.text()}",
        ]
        if self.dev is not None:
            lines.append(f"dev rise ({self.measured}): {self.dev.text()}")
        if self.test is not None:
            lines.append(f"held-out rise ({self.measured}): {self.test.text()}  budget {self.budget:g}%")
        lines.append(f"{self.evaluations} evaluations, {self.seconds:.0f} s; state {self.state_dir}")
        if self.checkpoint:
            lines.append(f"checkpoint: {self.checkpoint}")
        return "\n".join(lines)


class _Run:
    """One autopilot run's state: the model, the cache, the evaluator, the float reference."""

    def __init__(self, request: AutoRequest, progress: bool, say: Callable[[str], None]) -> None:
        from workbench.embedded_models.catalog import resolve_model
        from workbench.settings import run_dir

        self.request, self.progress, self.say = request, progress, say
        self.policy: AutopilotPolicy = load_policy(request.policy)
        check_ladder(request.rungs)
        self.source = resolve_model(request.model)
        label = Path(request.model).name if Path(request.model).is_dir() else request.model
        self.state = (
            Path(request.state_dir)
            if request.state_dir
            else run_dir("quantize-auto", f"{label}-{request.settings_key()}")
        )
        self.state.mkdir(parents=True, exist_ok=True)
        self.cache = EvalCache(self.state / "evaluations.jsonl")
        self.evaluations = 0

    def rise(self, plan: Losses, reference: Losses, tokens: int) -> Rise:
        return nll_rise(
            plan, reference, tokens, samples=self.policy.bootstrap_samples, confidence=self.policy.confidence
        )

    def losses(self, evaluator: Evaluator, plan: UnitPlan, split: str, repeats: int = 1) -> tuple[list[Losses], bool]:
        chosen = self.splits.dev if split == "dev" else self.splits.test
        key = "eval:" + digest(
            {
                "engine": evaluator.identity,
                "plan": sorted((k, v.value) for k, v in plan.items()),
                "texts": digest([(t.id, t.ids, t.start) for t in chosen]),
                "repeats": repeats,
            }
        )
        self.evaluations += 1
        stored = self.cache.get(key)
        if stored is not None:
            return stored["losses"], True
        started = time.perf_counter()
        measured = evaluator.losses(plan, chosen, repeats)
        self.cache.put(
            key,
            {
                "split": split,
                "engine": evaluator.name,
                "losses": measured,
                "seconds": round(time.perf_counter() - started, 2),
                "float_units": sorted(u for u, s in plan.items() if s is PlanScheme.FLOAT),
            },
        )
        return measured, False


def _proxy_scores(run: _Run, model: PlanModel, calibration: Sequence, scheme: PlanScheme) -> pd.DataFrame:
    """Every cheap proxy, and the requested one if it is not among them; cached by model, texts and scheme."""
    proxy = run.request.proxy
    key = "sensitivity:" + digest(
        {
            "model": model.identity,
            "texts": [(t.id, t.ids) for t in calibration],
            "scheme": scheme.value,
            "kl": proxy == "logit_kl",
        }
    )
    stored = run.cache.get(key)
    if stored is None:
        table = sensitivity.input_statistics(model, calibration, scheme, progress=run.progress)
        if proxy == "logit_kl":
            table["logit_kl"] = table["unit"].map(
                sensitivity.logit_kl(model, calibration, scheme, progress=run.progress)
            )
        stored = run.cache.put(key, {"table": table.to_dict(orient="records")})
    return pd.DataFrame(stored["table"])


def _evaluator(run: _Run, model: PlanModel) -> Evaluator:
    request = run.request
    if request.evaluator == "executor":
        return ExecutorEvaluator(model)
    from workbench.recipes import load_serving_recipe

    name = request.recipe or EMBEDDED_RECIPES.get(request.model)
    if name is None:
        raise WorkbenchError(
            f"--model {request.model}: give --recipe, the serving recipe of the float model (its settings serve "
            "every plan), or use --evaluator executor"
        )
    recipe = load_serving_recipe(name)
    if recipe.embedded_model is None or recipe.embedded_model != request.model:
        recipe = recipe.with_overrides(model=str(run.source))  # the recipe's settings, this model
    return ServedEvaluator(
        recipe,
        run.source,
        model.units,
        run.state,
        ranges=model.ranges,
        progress=run.progress,
        group_size=request.group_size,
    )


def run_autopilot(
    request: AutoRequest, *, progress: bool = True, say: Callable[[str], None] | None = None
) -> AutoResult:
    """Run the autopilot (see the module docstring); `say` receives one line per step (default: tqdm.write)."""
    started = time.perf_counter()
    run = _Run(request, progress, say or (tqdm.write if progress else (lambda _line: None)))
    model = PlanModel(run.source, group_size=request.group_size)
    calibration = texts.calibration(run.source, request.calibration_samples)
    model.calibrate(calibration)
    run.splits = texts.build_splits(
        run.source,
        request.datasets,
        limit=request.limit,
        target=request.target,
        max_tokens=request.max_tokens,
        model=model,
        cache=run.cache,
    )
    table = _proxy_scores(run, model, calibration, request.rungs[0])
    table.to_csv(run.state / SENSITIVITY_FILE, index=False)
    scores = dict(zip(table["unit"], table[request.proxy]))
    order = sorted(scores, key=lambda unit: (-scores[unit], unit))
    run.say(f"sensitivity ({request.proxy}, {request.rungs[0].value}): most sensitive {', '.join(order[:5])}")
    evaluator = _evaluator(run, model)
    everything_float = dict.fromkeys(order, PlanScheme.FLOAT)
    (float_a, float_b), _ = run.losses(evaluator, everything_float, "dev", repeats=2)
    dev_tokens = sum(t.scored for t in run.splits.dev)
    noise = run.rise(float_b, float_a, dev_tokens)
    spread = max(abs(noise.low), abs(noise.high))
    run.say(f"noise floor: {noise.text()}")
    common = dict(
        request=request,
        run=run,
        model=model,
        order=order,
        noise=noise,
        scores=scores,
        evaluator=evaluator,
        started=started,
    )
    if spread > run.policy.noise_fraction * request.budget:
        message = (
            f"the float model against itself spreads {spread:.3f}% on {evaluator.name}, more than "
            f"{run.policy.noise_fraction:g} x the budget {request.budget:g}%: raise --budget or --limit "
            "(more texts narrow the interval)"
        )
        return _finish(Outcome.REFUSED, message, {}, None, None, (), **common)

    def evaluate(plan: UnitPlan) -> tuple[Rise, bool]:
        (losses,), cached = run.losses(evaluator, plan, "dev")
        return run.rise(losses, float_a, dev_tokens), cached

    def show(step: Step) -> None:
        run.say(
            f"step {step.index} [{step.stage}] counts {step.counts}: {step.rise.text()} -> "
            f"{'holds' if step.holds else 'over budget'}{' (cached)' if step.cached else ''}"
        )

    cap = request.max_float if request.max_float is not None else int(run.policy.max_float_fraction * len(order))
    found = rollback_search(order, request.rungs, evaluate, request.budget, max_float=cap, progress=show)
    (float_test,), _ = run.losses(evaluator, everything_float, "test")
    (plan_test,), _ = run.losses(evaluator, found.plan, "test")
    test = run.rise(plan_test, float_test, sum(t.scored for t in run.splits.test))
    if found.outcome is SearchOutcome.INFEASIBLE:
        outcome = Outcome.INFEASIBLE
        message = (
            f"no plan with at most {cap} of {len(order)} units in float holds {request.budget:g}% on dev; "
            f"the best measured keeps {found.counts[0]} in float (dev upper end {found.rise.high:+.3f}%)"
        )
    elif test.high <= request.budget:
        outcome, message = (
            Outcome.HOLDS,
            (
                f"{request.budget:g}% holds on the held-out split: upper end "
                f"{test.high:+.3f}% with {found.counts[0]} of {len(order)} units in float"
            ),
        )
    else:
        outcome, message = (
            Outcome.FAILS_ON_TEST,
            (
                f"found on dev, but the held-out upper end {test.high:+.3f}% exceeds "
                f"{request.budget:g}%: raise --limit or --budget"
            ),
        )
    return _finish(outcome, message, found.plan, found.rise, test, found.steps, **common)


def _finish(
    outcome: Outcome,
    message: str,
    plan: Mapping[str, PlanScheme],
    dev: Rise | None,
    test: Rise | None,
    steps: Sequence[Step],
    *,
    request: AutoRequest,
    run: _Run,
    model: PlanModel,
    order: list[str],
    noise: Rise,
    scores: dict[str, float],
    evaluator: Evaluator,
    started: float,
) -> AutoResult:
    by_prefix = expand(dict(plan), model.units) if plan else {}
    modules = {p: by_prefix[p].value for p in model.prefixes if p in by_prefix}  # model order
    checkpoint = None
    if request.out is not None and plan:
        checkpoint = write_checkpoint(run.source, plan, model, request.out, request.format)
    result = AutoResult(
        outcome,
        message,
        request.budget,
        {u: s.value for u, s in plan.items()},
        modules,
        order,
        request.proxy,
        evaluator.measured(plan or {}).value,
        noise,
        dev,
        test,
        tuple(steps),
        run.evaluations,
        time.perf_counter() - started,
        run.splits.describe(),
        run.state,
        checkpoint,
        {u: float(v) for u, v in scores.items()},
        request.model,
        tuple(model.units),
        run.splits,
    )
    write_result(run.state / PLAN_FILE, result.to_dict(), provenance(model=request.model), AUTOPILOT_KIND)
    return result


def write_checkpoint(
    source: Path, plan: Mapping[str, PlanScheme], model: PlanModel, out: Path, fmt: QuantFormat
) -> Path:
    """The plan's checkpoint in `fmt` (the W8A8 family only: the writers store W8A8, W8A8_DYNAMIC, FLOAT)."""
    from workbench.quantize.checkpoint import write_plan

    layer_plan = {}
    for prefix, scheme in expand(dict(plan), model.units).items():
        if scheme.quant_type is None:
            raise WorkbenchError(
                f"{prefix} is {scheme.value}, which the checkpoint writers cannot store yet; "
                "choose a ladder of W8A8, W8A8_DYNAMIC and FLOAT for --out"
            )
        layer_plan[prefix] = scheme.quant_type
    return write_plan(
        source,
        layer_plan,
        fmt,
        Path(out).expanduser().resolve(),
        ranges=model.ranges,
        note={"autopilot": {u: s.value for u, s in plan.items()}},
    )
