"""How much each rollback unit loses to quantization: five cheap proxies and the oracle they stand in for.

Measured in the backend's executor (`plan_model.PlanModel`), on the calibration texts (proxies) and on
the search's dev split (oracle), for one scheme (the first rung of the search's ladder):

    proxy          what it measures on the unit's input or output                        cost
    range_span     max - min of the calibrated input (one static scale must cover it)    free (calibration)
    max_over_std   max(|min|, |max|) / std of the input: msmodelslim `analyze --metrics std`   one float pass
    kurtosis       E[(x - mean)^4] / std^4 of the input (heavy tails = outliers):
                   msmodelslim `analyze --metrics kurtosis`                               the same pass
    output_mse     |y_q - y|^2 / |y|^2 of the unit's outputs, the unit alone quantized,
                   on the float model's inputs (relative, so layers of any scale compare)  the same pass
    logit_kl       KL(float || plan) of the next-token distributions, the unit alone
                   quantized (mean nats per token)                                        one resumed pass per unit
    oracle         NLL gained on the dev split by rolling the unit back to float from the
                   all-quantized model (percent of the float NLL): the leave-one-out
                   benefit the search actually cares about                                one resumed pass per unit

(msmodelslim's sensitivity metrics: Ascend/msmodelslim docs/zh/api_reference/cli/msmodelslim_analyze.md.)
A proxy is good when it ranks units as the oracle does; `agreement` says how well (Spearman,
precision@k), and the autopilot orders its search by the proxy chosen from that table (`DEFAULT_PROXY`).
A resumed pass starts at the unit's layer from the cached input of that layer: the layers below are
untouched by the unit, so their output is reused (see `PlanModel.prefill`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd
import torch
from tqdm.auto import tqdm

from ascend_backend.quantization.scheme import PlanScheme
from ascend_backend.quantization.units import RollbackUnit
from workbench.quantize.plan_model import PlanModel, ScoredText
from workbench.quantize.stats import precision_at_k, spearman

PROXIES = ("range_span", "max_over_std", "kurtosis", "output_mse", "logit_kl")
# Chosen from the agreement table on SmolLM2 (`benchmarks/bench_quant_autopilot.py agreement`, 6 Dec, figures
# in the README's quantization section). For static W8A8, the scheme vllm-ascend serves by default, no proxy
# ranks well (Spearman 0.04-0.26 against the oracle), but kurtosis and max/std name the oracle's top 5 exactly
# (precision@5 1.0; logit_kl 0.6) at 1/40 of logit_kl's cost (11 s for the four input statistics against
# 406 s). Of the two, kurtosis also ranks planted outliers first (tests/unit/workbench/quantize). For
# W8A8_DYNAMIC no proxy agrees with the oracle: there the search's binary steps do the work.
DEFAULT_PROXY = "kurtosis"


class _Moments:
    """Running count, min, max and the first four power sums of every element seen (float64)."""

    def __init__(self) -> None:
        self.n = 0
        self.minimum, self.maximum = math.inf, -math.inf
        self.sums = torch.zeros(4, dtype=torch.float64)

    def add(self, x: torch.Tensor) -> None:
        x = x.detach().double().flatten()
        self.n += x.numel()
        self.minimum = min(self.minimum, float(x.min()))
        self.maximum = max(self.maximum, float(x.max()))
        self.sums += torch.stack([x.sum(), (x * x).sum(), (x**3).sum(), (x**4).sum()])

    def std_kurtosis(self) -> tuple[float, float]:
        m1, m2, m3, m4 = (self.sums / self.n).tolist()
        var = max(m2 - m1 * m1, 0.0)
        central4 = m4 - 4 * m1 * m3 + 6 * m1 * m1 * m2 - 3 * m1**4
        return math.sqrt(var), (central4 / (var * var) if var > 0 else 0.0)


def input_statistics(
    model: PlanModel, texts: Sequence[ScoredText], scheme: PlanScheme, *, progress: bool = True
) -> pd.DataFrame:
    """One float pass over `texts`: per unit range_span, max_over_std, kurtosis and output_mse.

    Every unit's input is observed on its first member; each member's quantized twin (under `scheme`)
    runs on the same float input beside the float module, and the squared differences are summed.
    """
    model.apply({})
    moments = {unit.name: _Moments() for unit in model.units}
    error = dict.fromkeys(moments, 0.0)
    energy = dict.fromkeys(moments, 0.0)
    handles = []
    for unit in model.units:
        for prefix in unit.members:
            module = model.float_module(prefix)
            twin = model.module(prefix, scheme)

            def hook(_m, args, out, _unit=unit.name, _twin=twin, _observe=prefix == unit.reader):
                if _observe:
                    moments[_unit].add(args[0])
                error[_unit] += float((_twin(args[0]).double() - out.double()).pow(2).sum())
                energy[_unit] += float(out.double().pow(2).sum())

            handles.append(module.register_forward_hook(hook))
    try:
        for batch in tqdm(model.batches(texts), desc="input statistics", unit="batch", disable=not progress):
            model.prefill(batch)
    finally:
        for handle in handles:
            handle.remove()
    rows = []
    for unit in model.units:
        m = moments[unit.name]
        std, kurt = m.std_kurtosis()
        rows.append(
            {
                "unit": unit.name,
                "layer": unit.layer,
                "kind": unit.kind,
                "range_span": m.maximum - m.minimum,
                "max_over_std": max(abs(m.minimum), abs(m.maximum)) / std if std > 0 else 0.0,
                "kurtosis": kurt,
                "output_mse": error[unit.name] / energy[unit.name] if energy[unit.name] > 0 else 0.0,
            }
        )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class _Captured:
    batch: list[ScoredText]
    layer_inputs: list[torch.Tensor]  # the input of every layer under the base plan


def _capture(model: PlanModel, texts: Sequence[ScoredText]) -> list[_Captured]:
    return [_Captured(batch, model.prefill(batch, capture=True)[1]) for batch in model.batches(texts)]


def _per_unit(
    model: PlanModel,
    units: Sequence[RollbackUnit],
    captured: list[_Captured],
    plan_for: Callable[[RollbackUnit], dict[str, PlanScheme]],
    measure: Callable[[_Captured, torch.Tensor], float],
    *,
    desc: str,
    progress: bool,
    done: Callable[[str, float], None] | None = None,
    known: dict[str, float] | None = None,
) -> dict[str, float]:
    """For each unit: apply its plan, resume every batch at the unit's layer, sum `measure` over batches."""
    results = dict(known or {})
    for unit in tqdm(units, desc=desc, unit="unit", disable=not progress):
        if unit.name in results:
            continue
        model.apply_units(plan_for(unit))
        total = 0.0
        for item in captured:
            final, _ = model.prefill(item.batch, start_layer=unit.layer, hidden=item.layer_inputs[unit.layer])
            total += measure(item, final)
        results[unit.name] = total
        if done is not None:
            done(unit.name, total)
    return results


def logit_kl(
    model: PlanModel, texts: Sequence[ScoredText], scheme: PlanScheme, *, progress: bool = True
) -> dict[str, float]:
    """Per unit: mean KL(float || unit quantized alone) over the texts' scored positions (nats/token)."""
    model.apply({})
    captured = _capture(model, texts)
    reference = {
        id(item): [lp.clone() for lp in model.scored_logprobs(item.batch, model.prefill(item.batch)[0])]
        for item in captured
    }
    tokens = sum(t.scored for t in texts)

    def kl(item: _Captured, final: torch.Tensor) -> float:
        total = 0.0
        for ref, got in zip(reference[id(item)], model.scored_logprobs(item.batch, final)):
            total += float((ref.exp() * (ref - got)).sum(dtype=torch.float64))
        return total / tokens

    return _per_unit(model, model.units, captured, lambda u: {u.name: scheme}, kl, desc="logit KL", progress=progress)


def oracle(
    model: PlanModel,
    texts: Sequence[ScoredText],
    scheme: PlanScheme,
    *,
    progress: bool = True,
    known: dict[str, float] | None = None,
    done: Callable[[str, float], None] | None = None,
) -> dict[str, float]:
    """Per unit: the dev NLL rolled back by keeping that unit FLOAT in the all-`scheme` model, in percent of
    the float model's NLL (positive = the unit costs accuracy). `known` units are not measured again;
    `done(unit, value)` is called as each is measured (the autopilot stores it)."""
    model.apply({})
    float_nll = sum(loss.nll_sum for loss in model.score(texts))
    everything = {unit.name: scheme for unit in model.units}
    model.apply_units(everything)
    captured = _capture(model, texts)
    all_quantized = sum(
        loss.nll_sum for item in captured for loss in model.losses(item.batch, model.prefill(item.batch)[0])
    )

    def nll(item: _Captured, final: torch.Tensor) -> float:
        return sum(loss.nll_sum for loss in model.losses(item.batch, final))

    def plan_for(unit: RollbackUnit) -> dict[str, PlanScheme]:
        return {**everything, unit.name: PlanScheme.FLOAT}

    def record(name: str, value: float) -> None:
        if done is not None:
            done(name, _benefit(value))

    def _benefit(rolled_back: float) -> float:
        return 100.0 * (all_quantized - rolled_back) / float_nll

    known_nll = {k: all_quantized - v * float_nll / 100.0 for k, v in (known or {}).items()}
    rolled = _per_unit(
        model,
        model.units,
        captured,
        plan_for,
        nll,
        desc="oracle (leave one out)",
        progress=progress,
        done=record,
        known=known_nll,
    )
    return {name: _benefit(value) for name, value in rolled.items()}


def agreement(table: pd.DataFrame, oracle_column: str = "oracle", ks: Sequence[int] = (3, 5, 10)) -> pd.DataFrame:
    """Per proxy: Spearman with the oracle and precision@k for each k (k capped at the number of units)."""
    oracle_scores = dict(zip(table["unit"], table[oracle_column]))
    rows = []
    for proxy in PROXIES:
        if proxy not in table:
            continue
        scores = dict(zip(table["unit"], table[proxy]))
        row = {"proxy": proxy, "spearman": spearman(list(scores.values()), list(oracle_scores.values()))}
        for k in ks:
            if k <= len(table):
                row[f"precision@{k}"] = precision_at_k(scores, oracle_scores, k)
        rows.append(row)
    return pd.DataFrame(rows)
