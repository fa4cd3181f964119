"""`ascend-workbench baseline`: keep result files as a named baseline for `regress`.

    ascend-workbench baseline save --name tiny-good runs/good-1.json runs/good-2.json runs/good-3.json
    ascend-workbench baseline save --name tiny-good --append runs/good-4.json   # more repeats
    ascend-workbench baseline list
    ascend-workbench baseline show tiny-good
    ascend-workbench baseline delete tiny-good

Baselines live under $ASCEND_WORKBENCH_DATA/baselines (default ~/.local/share/ascend-workbench), each
file copied with its provenance stamp. A failing command changes nothing stored.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from workbench.verbs._common import add_json_print

RESULT_HELP = "bench --json files, sweep results.jsonl, compare-ops/compare-dumps --json reports"


HELP = "store results as a named baseline for `regress`; list, show, delete"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="baseline_action", metavar="ACTION")
    actions.required = True

    save = actions.add_parser("save", help="store result files (with their fingerprints) under a name")
    save.add_argument("--name", required=True, help="baseline name (letters, digits, . _ -)")
    save.add_argument("results", nargs="+", type=Path, metavar="RESULT", help=RESULT_HELP)
    mode = save.add_mutually_exclusive_group()
    mode.add_argument("--replace", action="store_true", help="overwrite an existing baseline of that name")
    mode.add_argument(
        "--append", action="store_true", help="add these runs (e.g. more repeats) to an existing baseline"
    )
    save.set_defaults(handler=run_save)

    listing = actions.add_parser("list", help="every stored baseline: runs, workloads, stack")
    add_json_print(listing, "one object per baseline")
    listing.set_defaults(handler=run_list)

    show = actions.add_parser("show", help="one baseline: files, per-series medians and spreads, fingerprint")
    show.add_argument("name", help="the baseline to show")
    show.add_argument("--thresholds", help="thresholds file whose metrics are shown (default: the shipped one)")
    add_json_print(show, "the manifest and the latest stack fingerprint")
    show.set_defaults(handler=run_show)

    delete = actions.add_parser("delete", help="remove a stored baseline")
    delete.add_argument("name", help="the baseline to delete")
    delete.set_defaults(handler=run_delete)


def run_save(args: argparse.Namespace) -> int:
    from workbench.regress.api import save_baseline, stack_summary

    outcome = save_baseline(args.name, args.results, replace=args.replace, append=args.append)
    baseline = outcome.baseline
    for path in outcome.duplicates:
        print(f"skipped {path}: the same file is already stored in {args.name!r}")
    series = sorted({r.series for r in baseline.runs})
    print(
        f"baseline {args.name!r}: {len(outcome.added)} file(s) added, {len(baseline.runs)} run(s) in {len(series)} series"
    )
    print(f"stack: {stack_summary(baseline.runs[-1].provenance.get('stack'))}")
    print(f"stored in {baseline.path}")
    return 0


def run_list(args: argparse.Namespace) -> int:
    from workbench.regress.api import baselines_root, list_baselines, stack_summary

    listed = list_baselines()
    if not listed and not args.json:
        print(
            f"no baselines in {baselines_root()}; save one with `ascend-workbench baseline save --name NAME RESULT...`"
        )
    for item in listed:
        b = item.baseline
        if args.json:
            row = {"name": item.name, "problem": item.problem}
            if b is not None:
                row |= {
                    "created_at": b.created_at,
                    "updated_at": b.updated_at,
                    "runs": len(b.runs),
                    "series": sorted({r.series for r in b.runs}),
                    "path": str(b.path),
                }
            print(json.dumps(row))
        elif b is None:
            print(f"{item.name:<24} DAMAGED: {item.problem}")
        else:
            kinds = ", ".join(sorted({r.kind.value for r in b.runs}))
            print(f"{item.name:<24} {len(b.runs):>3} run(s) ({kinds})  updated {b.updated_at}")
            print(f"{'':<24} {'; '.join(sorted({r.series for r in b.runs}))}")
            print(f"{'':<24} {stack_summary(b.runs[-1].provenance.get('stack'))}")
    return 0


def run_show(args: argparse.Namespace) -> int:
    import pandas as pd

    from workbench.regress.api import load_baseline, load_thresholds, series_summary, stack_summary, verdict_summary

    baseline = load_baseline(args.name)
    latest = max(baseline.runs, key=lambda r: r.created_at).provenance
    if args.json:
        print(json.dumps({"manifest": baseline.manifest, "latest_fingerprint": latest}, indent=1))
        return 0
    print(
        f"baseline {baseline.name!r} in {baseline.path}: created {baseline.created_at}, updated {baseline.updated_at}"
    )
    for entry in baseline.manifest["files"]:
        print(f"  {entry['stored']}  {entry['kind']}, {entry['runs']} run(s), from {entry['original']}")
    metrics = list(load_thresholds(args.thresholds).metrics)
    with pd.option_context("display.width", 200, "display.max_rows", 500, "display.float_format", "{:.4g}".format):
        table = series_summary(baseline.runs, metrics)
        print(table.to_string(index=False) if not table.empty else "")
        verdicts = verdict_summary(baseline.runs)
        print(verdicts.to_string(index=False) if not verdicts.empty else "")
    print(f"stack: {stack_summary(latest.get('stack'))}")
    if latest.get("recipe_hash"):
        print(f"recipe: {latest.get('recipe', {}).get('name')} ({latest['recipe_hash']})")
    if latest.get("model_hashes"):
        hashes = latest["model_hashes"]
        print(
            f"model: {hashes.get('path')} weights {str(hashes.get('weights_sha256'))[:12]} config {str(hashes.get('config_sha256'))[:12]}"
        )
    return 0


def run_delete(args: argparse.Namespace) -> int:
    from workbench.regress.api import delete_baseline

    print(f"deleted baseline {args.name!r} ({delete_baseline(args.name)})")
    return 0
