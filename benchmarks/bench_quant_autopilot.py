"""The quantization autopilot, measured: planted outliers, proxy-vs-oracle agreement, the search, throughput, lint.

    .venv/bin/python benchmarks/bench_quant_autopilot.py planted               # tiny, 10 seeds (+ enumeration)
    .venv/bin/python benchmarks/bench_quant_autopilot.py agreement --scheme W8A8_DYNAMIC   # SmolLM2, executor
    .venv/bin/python benchmarks/bench_quant_autopilot.py search --budget 0.5   # SmolLM2, served (quantize --auto)
    .venv/bin/python benchmarks/bench_quant_autopilot.py throughput --plan runs/.../plan.json --pairs 2
    .venv/bin/python benchmarks/bench_quant_autopilot.py lint                  # linter timing

planted     For each seed, three units of tiny get a 64x channel (float logits unchanged, checked); every
            proxy ranks the units for static W8A8 and we count the seeds whose top 3 are exactly the planted
            ones. For `--enumerate` seeds, every set of at most 3 units kept in float is evaluated in the
            executor (697 sets) to know the true minimum float set for the budget, and the search's answer
            (ladder W8A8 -> FLOAT, ordered by the chosen proxy) is compared with it.
agreement   On SmolLM2 in the executor: the five proxies and the leave-one-out oracle for one scheme, with
            Spearman and precision@k per proxy (the table the default proxy is chosen from).
search      `run_autopilot` on SmolLM2 with the served evaluator: evaluations, wall time, the plan, dev and
            held-out rises (measurements cached in --state-dir: a rerun resumes).
throughput  float / all-int8 (W8A8_DYNAMIC everywhere) / the plan on the served engine, alternating order per
            pair (`vllm bench serve` definitions via the workbench's load generator); ratios per pair and
            geometric means.
schemes     Every scheme on every unit at once, tiny (the control: SmolLM2's weights come from a 4-bit GGUF)
            and SmolLM2: NLL rise on the held-out split in the executor (W8A8 / W8A8_DYNAMIC: the integer path;
            W8A16, W4A16, W4A8: fake-quant) and on the served engine where vLLM's CPU build runs the scheme
            (W8A8_DYNAMIC, W4A16); C8 (int8 KV cache, fake-quant at the cache write) as greedy agreement with
            the float model over 32 decoded tokens.
lint        `lint_checkpoint` on the corpus and on SmolLM2's plan checkpoint, every tag: seconds per call.

Results are printed and written as JSON under --out (default runs/bench-quant-autopilot/).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from pathlib import Path

import torch

from ascend_backend.quantization.scheme import PlanScheme
from workbench.embedded_models.catalog import resolve_model
from workbench.quantize import planted, sensitivity, texts
from workbench.quantize.autopilot import AutoRequest, run_autopilot
from workbench.quantize.evalcache import EvalCache
from workbench.quantize.plan_model import PlanModel
from workbench.quantize.search import rollback_search
from workbench.quantize.stats import nll_rise

CHEAP = ("range_span", "max_over_std", "kurtosis", "output_mse")


def _scored(split) -> int:
    """The tokens a split's texts score (what a rise is measured over)."""
    return sum(t.scored for t in split)


def _save(out: Path, name: str, data: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(data, indent=1, default=str) + "\n")
    print(f"wrote {out / f'{name}.json'}", flush=True)


def _table(model: PlanModel, calibration, scheme: PlanScheme):
    table = sensitivity.input_statistics(model, calibration, scheme, progress=False)
    table["logit_kl"] = table["unit"].map(sensitivity.logit_kl(model, calibration, scheme, progress=False))
    return table


def planted_bench(args) -> None:
    tiny = resolve_model("tiny")
    work = args.out / "planted"
    hits = dict.fromkeys(sensitivity.PROXIES, 0)
    rows, enumerated = [], []
    for seed in range(args.seeds):
        chosen = [u.name for u in planted.choose_units(PlanModel(tiny).units, 3, seed)]
        directory = work / f"seed{seed}"
        if not (directory / "planted.json").is_file():
            planted.write_planted(tiny, directory, chosen, seed=seed)
        model = PlanModel(directory, max_batch_tokens=1024)
        calibration = texts.calibration(directory, 8, max_tokens=128)
        model.calibrate(calibration)
        table = _table(model, calibration, PlanScheme.W8A8)
        found = {}
        for proxy in sensitivity.PROXIES:
            top = list(table.sort_values(proxy, ascending=False)["unit"].head(3))
            found[proxy] = sorted(top) == sorted(chosen)
            hits[proxy] += found[proxy]
        row = {"seed": seed, "planted": chosen, "top3_is_planted": found}
        if seed < args.enumerate:
            row["enumeration"] = _enumerate(model, directory, table, args)
            enumerated.append(row["enumeration"])
        rows.append(row)
        print(
            f"seed {seed}: planted {chosen}; top-3 found by {[p for p, ok in found.items() if ok]}"
            + (
                f"; search {row['enumeration']['search_set']} vs true minimum {row['enumeration']['minimum_sets']}"
                if "enumeration" in row
                else ""
            ),
            flush=True,
        )
    summary = {"seeds": args.seeds, "top3_recovered_seeds": hits, "enumerated": enumerated, "rows": rows}
    print("top-3 = planted units, seeds out of", args.seeds, hits)
    _save(args.out, "planted", summary)


def _enumerate(model: PlanModel, directory: Path, table, args) -> dict:
    """Every set of <= 3 units kept FLOAT (the rest W8A8), on the dev split: the true minimum for the budget."""
    splits = texts.build_splits(
        directory, ("text",), limit=16, target=texts.Target.FLOAT_GREEDY, max_tokens=128, model=model
    )
    model.apply({})
    reference = {loss.id: loss.nll_sum for loss in model.score(splits.dev)}
    names = [u.name for u in model.units]
    started = time.perf_counter()
    holds: dict[tuple[str, ...], float] = {}
    evaluated = 0
    for size in range(0, 4):
        for subset in itertools.combinations(names, size):
            evaluated += 1
            model.apply_units({n: (PlanScheme.FLOAT if n in subset else PlanScheme.W8A8) for n in names})
            rise = nll_rise({x.id: x.nll_sum for x in model.score(splits.dev)}, reference, _scored(splits.dev))
            if rise.high <= args.budget:
                holds[subset] = rise.high
        if any(len(s) == size for s in holds):
            break
    minimum = min((len(s) for s in holds), default=None)
    minimum_sets = sorted(sorted(s) for s in holds if len(s) == minimum)
    seconds = time.perf_counter() - started
    proxy = args.proxy
    order = list(table.sort_values(proxy, ascending=False)["unit"])

    def evaluate(plan):
        model.apply_units(plan)
        return nll_rise({x.id: x.nll_sum for x in model.score(splits.dev)}, reference, _scored(splits.dev)), False

    result = rollback_search(order, (PlanScheme.W8A8, PlanScheme.FLOAT), evaluate, args.budget)
    search_set = sorted(u for u, s in result.plan.items() if s is PlanScheme.FLOAT)
    return {
        "budget": args.budget,
        "sets_evaluated": evaluated,
        "minimum_size": minimum,
        "minimum_sets": minimum_sets,
        "search_set": search_set,
        "search_is_a_minimum": search_set in minimum_sets,
        "search_evaluations": result.evaluations,
        "enumeration_seconds": round(seconds, 1),
    }


def agreement_bench(args) -> None:
    source = resolve_model(args.model)
    scheme = PlanScheme.parse(args.scheme)
    started = time.perf_counter()
    model = PlanModel(source)
    cache = EvalCache(args.out / f"agreement-{args.model}-{scheme.value}.jsonl")
    calibration = texts.calibration(source, args.calibration)
    model.calibrate(calibration)
    splits = texts.build_splits(source, limit=args.limit, target=texts.Target(args.target), model=model, cache=cache)
    timings = {}
    t = time.perf_counter()
    table = sensitivity.input_statistics(model, calibration, scheme, progress=True)
    timings["cheap_proxies_s"] = time.perf_counter() - t
    t = time.perf_counter()
    table["logit_kl"] = table["unit"].map(sensitivity.logit_kl(model, calibration, scheme, progress=True))
    timings["logit_kl_s"] = time.perf_counter() - t
    known = {r["unit"]: r["value"] for r in cache.log.read().records if r.get("kind") == "oracle"}
    t = time.perf_counter()
    oracle = sensitivity.oracle(
        model,
        splits.dev,
        scheme,
        progress=True,
        known=known,
        done=lambda unit, value: cache.put(f"oracle:{unit}", {"kind": "oracle", "unit": unit, "value": value}),
    )
    timings["oracle_s"] = time.perf_counter() - t
    table["oracle"] = table["unit"].map(oracle)
    agree = sensitivity.agreement(table, ks=(5, 10, 20))
    print(table.sort_values("oracle", ascending=False).head(15).to_string(index=False))
    print(agree.to_string(index=False))
    _save(
        args.out,
        f"agreement-{args.model}-{scheme.value}",
        {
            "model": args.model,
            "scheme": scheme.value,
            "splits": splits.describe(),
            "calibration_texts": len(calibration),
            "agreement": agree.to_dict(orient="records"),
            "table": table.to_dict(orient="records"),
            "timings_s": timings,
            "seconds": time.perf_counter() - started,
        },
    )


def search_bench(args) -> None:
    request = AutoRequest(
        args.model,
        budget=args.budget,
        evaluator=args.evaluator,
        limit=args.limit,
        target=texts.Target(args.target),
        proxy=args.proxy,
        ladder=tuple(PlanScheme.parse(s) for s in args.ladder.split(",")) if args.ladder else (),
        calibration_samples=args.calibration,
        state_dir=args.out / f"search-{args.model}",
        max_float=args.max_float,
    )
    result = run_autopilot(request, progress=False, say=lambda line: print(line, flush=True))
    print(result.text())
    _save(args.out, f"search-{args.model}-{args.evaluator}", result.to_dict())


def throughput_bench(args) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_quantized_serving import measure_recipe

    from workbench.quantize.checkpoint import write_plan
    from workbench.recipes import load_serving_recipe
    from workbench.serving.load.workload import Workload

    plan = json.loads(Path(args.plan).read_text())
    source = resolve_model(args.model)
    base = load_serving_recipe(f"cpu-{args.model}")
    work = args.out / "throughput"
    recipes = {"float": base}
    for label, modules in (("all-int8", {m: "W8A8_DYNAMIC" for m in plan["modules"]}), ("plan", plan["modules"])):
        directory = work / label
        if not (directory / "config.json").is_file():
            from ascend_backend.quantization import QuantFormat, QuantType

            write_plan(source, {m: QuantType(s) for m, s in modules.items()}, QuantFormat.COMPRESSED_TENSORS, directory)
        recipes[label] = base.with_overrides(
            name=f"{base.name}-{label}",
            model=str(directory),
            served_model_name=f"{args.model}-{label}",
            engine={"quantization": "compressed-tensors"},
        )
    workload = Workload(args.input_len, args.output_len, num_prompts=args.num_prompts, concurrency=args.concurrency)
    warmup = Workload(args.input_len, 8, num_prompts=4, concurrency=4)
    pairs = []
    names = list(recipes)
    for pair in range(args.pairs):
        order = names if pair % 2 == 0 else names[::-1]
        got = {name: measure_recipe(recipes[name], workload, warmup) for name in order}
        ratios = {f"{n}/float": got[n]["output_tok_s"] / got["float"]["output_tok_s"] for n in names if n != "float"}
        pairs.append({"order": order, "results": got, "ratios": ratios})
        print(
            f"pair {pair} ({' -> '.join(order)}): "
            + ", ".join(f"{n} {got[n]['output_tok_s']:.1f} tok/s" for n in names)
            + "; "
            + ", ".join(f"{k} {v:.3f}" for k, v in ratios.items()),
            flush=True,
        )
    geo = {k: math.exp(sum(math.log(p["ratios"][k]) for p in pairs) / len(pairs)) for k in pairs[0]["ratios"]}
    print("geometric mean over pairs:", {k: round(v, 3) for k, v in geo.items()})
    _save(args.out, f"throughput-{args.model}", {"pairs": pairs, "geomean": geo, "workload": vars(workload)})


def schemes_bench(args) -> None:
    from ascend_backend.models import Executor, SamplingParams
    from ascend_backend.quantization.kv_c8 import (
        KVScales,
        fake_quant_kv_write,
        kv_cache_write,
        layer_finder,
        observe_kv,
    )
    from workbench.quantize.evaluators import ServedEvaluator, cpu_wna16_kernel
    from workbench.quantize.plan_model import measured_by
    from workbench.recipes import load_serving_recipe

    rows = []
    for name in args.models.split(","):
        source = resolve_model(name)
        model = PlanModel(source, group_size=args.group_size)
        model.calibrate(texts.calibration(source, args.calibration))
        splits = texts.build_splits(source, limit=args.limit, target=texts.Target(args.target), model=model)
        model.apply({})
        reference = {x.id: x.nll_sum for x in model.score(splits.test)}
        served = ServedEvaluator(
            load_serving_recipe(f"cpu-{name}"),
            source,
            model.units,
            args.out / f"schemes-{name}",
            progress=False,
            group_size=args.group_size,
        )
        (served_float,) = served.losses({u.name: PlanScheme.FLOAT for u in model.units}, splits.test)
        for scheme in (
            PlanScheme.W8A8_DYNAMIC,
            PlanScheme.W8A8,
            PlanScheme.W8A16,
            PlanScheme.W4A16,
            PlanScheme.W4A8_DYNAMIC,
        ):
            plan = {u.name: scheme for u in model.units}
            model.apply_units(plan)
            rise = nll_rise({x.id: x.nll_sum for x in model.score(splits.test)}, reference, _scored(splits.test))
            rows.append(
                {"model": name, "scheme": scheme.value, "measured": measured_by(scheme).value, **rise.to_dict()}
            )
            print(rows[-1], flush=True)
            if scheme is PlanScheme.W4A16 and not cpu_wna16_kernel():
                rows.append(
                    {
                        "model": name,
                        "scheme": scheme.value,
                        "measured": "served",
                        "note": "not served: this vLLM CPU build has no cpu_gemm_wna16 (AVX512 only)",
                    }
                )
                print(rows[-1], flush=True)
            elif scheme in (PlanScheme.W8A8_DYNAMIC, PlanScheme.W4A16):
                (losses,) = served.losses(plan, splits.test)
                rows.append(
                    {
                        "model": name,
                        "scheme": scheme.value,
                        "measured": "served",
                        **nll_rise(losses, served_float, _scored(splits.test)).to_dict(),
                    }
                )
                print(rows[-1], flush=True)
        model.apply({})
        prompts = [list(t.ids[: t.start]) for t in splits.test]
        executor = Executor(
            model.model,
            block_size=32,
            num_blocks=(max(map(len, prompts)) // 32 + 3) * len(prompts),
            enable_prefix_caching=False,
        )
        sampling = SamplingParams(max_tokens=32, stop_at_eos=False)
        layer_of = layer_finder(executor.kv_caches)
        amax: dict = {}
        with kv_cache_write(observe_kv(layer_of, amax)):
            executor.generate(
                [list(t.ids) for t in texts.calibration(source, args.calibration)], SamplingParams(max_tokens=1)
            )
        scales = {i: KVScales.from_amax(*a) for i, a in amax.items()}
        plain = executor.generate(prompts, sampling)
        with kv_cache_write(fake_quant_kv_write(layer_of, scales)):
            c8 = executor.generate(prompts, sampling)
        agree = [
            next((i for i, (a, b) in enumerate(zip(p.token_ids, q.token_ids)) if a != b), 32) / 32
            for p, q in zip(plain, c8)
        ]
        rows.append(
            {
                "model": name,
                "scheme": "C8 (KV int8)",
                "measured": "fake-quant",
                "greedy_agreement": sum(agree) / len(agree),
                "exact": sum(a == 1 for a in agree) / len(agree),
            }
        )
        print(rows[-1], flush=True)
    _save(args.out, "schemes", {"rows": rows, "group_size": args.group_size, "limit": args.limit})


def lint_bench(args) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "quant_lint"))
    import build  # the corpus builder

    from workbench.lint.checkpoint import lint_checkpoint

    corpus = args.out / "lint-corpus"
    t = time.perf_counter()
    if not corpus.is_dir():
        build.build(corpus, resolve_model("tiny"))
    built = time.perf_counter() - t
    cases = {p.name: p for p in sorted(corpus.iterdir()) if p.is_dir()}
    targets = dict(cases)
    if args.plan_dir:
        targets["smollm2-plan"] = Path(args.plan_dir)
    targets["smollm2-w8a8"] = resolve_model("smollm2-w8a8")
    seconds = {}
    for name, path in targets.items():
        t = time.perf_counter()
        for _ in range(args.repeats):
            lint_checkpoint(path)
        seconds[name] = (time.perf_counter() - t) / args.repeats
    print(
        f"corpus built in {built:.1f} s; lint per checkpoint (all tags): max {max(seconds.values()):.3f} s, "
        f"smollm2-w8a8 {seconds['smollm2-w8a8']:.3f} s"
    )
    _save(args.out, "lint", {"corpus_build_s": built, "seconds_per_lint": seconds})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("part", choices=["planted", "agreement", "search", "throughput", "schemes", "lint"])
    parser.add_argument("--models", default="tiny,smollm2", help="schemes: models to measure")
    parser.add_argument("--group-size", type=int, default=32)
    parser.add_argument("--out", type=Path, default=Path("runs/bench-quant-autopilot"))
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--enumerate", type=int, default=2, help="planted: seeds whose float sets are enumerated")
    parser.add_argument("--budget", type=float, default=0.5)
    parser.add_argument("--proxy", default=sensitivity.DEFAULT_PROXY)
    parser.add_argument("--scheme", default="W8A8_DYNAMIC")
    parser.add_argument("--evaluator", default="served")
    parser.add_argument("--ladder", default="")
    parser.add_argument("--limit", type=int, default=24)
    parser.add_argument("--target", default="reference")
    parser.add_argument("--calibration", type=int, default=16)
    parser.add_argument("--max-float", type=int, default=None)
    parser.add_argument("--plan", help="throughput: the search's plan.json")
    parser.add_argument("--plan-dir", help="lint: a plan checkpoint to time")
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--num-prompts", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(2)
    {
        "planted": planted_bench,
        "agreement": agreement_bench,
        "search": search_bench,
        "throughput": throughput_bench,
        "schemes": schemes_bench,
        "lint": lint_bench,
    }[args.part](args)


if __name__ == "__main__":
    main()
