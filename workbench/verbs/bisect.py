"""`ascend-workbench bisect`: find the feature that breaks a vLLM server, automatically."""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.verbs._common import add_no_lint, lint_recipes

HELP = "baseline with every feature off, then each feature alone, cumulatively and in pairs"
DESCRIPTION = (
    "Feature-by-feature enabling on real vLLM servers started from RECIPE. Each step is "
    "saved to OUT/steps.jsonl as it finishes; rerunning with the same --out resumes. Exit 1 when a "
    "culprit is found or the baseline fails."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--recipe", required=True, help="serving recipe (name in recipes/serving or a path)")
    parser.add_argument(
        "--features",
        type=Path,
        default=None,
        help="feature plan YAML (default: recipes/features/<target>.yaml for the recipe's device)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output directory (default: runs/bisect/<recipe>-<hash of recipe and plan>; rerunning resumes)",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="FEATURE",
        help="test only this feature of the plan (repeatable; default: every feature)",
    )
    parser.add_argument("--startup-timeout", type=float, default=None, help="seconds to wait for each server")
    add_no_lint(parser)
    parser.add_argument(
        "--parallel",
        metavar="auto|N",
        help="run the 'each feature alone' steps at once, one server per device group (NPU/GPU "
        "cards sized by tensor x pipeline parallel size, CPU cores split N ways); 'auto': as many "
        "as the cards allow, on CPU one per NUMA node",
    )
    parser.add_argument("--devices", metavar="IDS", help="NPU/GPU ids to split into groups (default: the visible ones)")
    parser.add_argument(
        "--kv-budget",
        metavar="SIZE",
        help="CPU: KV-cache bytes split between concurrent servers (default: half the available memory)",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    import pandas as pd

    from workbench.bisect.api import BisectRequest, run_bisect, steps_table, verdict_table

    request = BisectRequest.load(
        args.recipe,
        args.features,
        only=tuple(args.only),
        out=args.out,
        startup_timeout_s=args.startup_timeout,
    )
    lint_recipes(args, [request.recipe])  # the recipe must start; a feature that lint rejects is for the bisect to show
    print(f"bisect of {request.recipe.name} with plan {request.plan.name}: steps in {request.out_dir}")
    outcome = run_bisect(request, pool=device_pool(args, request.recipe), on_step=_print_step)
    with pd.option_context("display.width", 220, "display.max_colwidth", 70):
        print(steps_table(outcome.records).drop(columns=["log_path", "fix"]).to_string(index=False))
        print()
        print(verdict_table(outcome).to_string(index=False))
    print(f"\nverdict: {outcome.status.value}: {outcome.message}")
    return 0 if outcome.status == "all_pass" else 1


def _print_step(record) -> None:
    features = "+".join(record.features) or "baseline"
    print(f"  {record.kind:10s} {features:45s} {'pass' if record.passed else 'FAIL'}  {record.detail[:80]}")


def device_pool(args: argparse.Namespace, recipe):
    """The device pool for --parallel (None without it): one WorkbenchError per bad flag value."""
    import os

    from workbench.serving.api import kv_budget_flag, local_pool, parse_devices, resolve_parallel

    parallel = resolve_parallel(args.parallel)
    if parallel is None:
        return None
    budget = kv_budget_flag(args.kv_budget)
    return local_pool(
        recipe.device,
        parallel,
        dict(os.environ),
        cores=sorted(os.sched_getaffinity(0)),
        devices=parse_devices(args.devices) if args.devices else (),
        kv_budget_bytes=budget,
    )
