"""`ascend-workbench models`: prepare the embedded default models and show where they are.

    ascend-workbench models prepare tiny        # prints the directory (stdout), progress on stderr
    ascend-workbench models prepare all         # tiny, then smollm2: one path per line
    ascend-workbench models list                # name, ready/missing, path, what it is

Paths go to stdout alone so scripts can write `MODEL=$(ascend-workbench models prepare tiny)`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from workbench.embedded_models import api as embedded_models
from workbench.embedded_models.api import EmbeddedModel
from workbench.verbs._common import add_json_print

ALL = "all"


HELP = "prepare the embedded models (tiny, smollm2) and list them"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="models_action", metavar="ACTION")
    actions.required = True

    prepare = actions.add_parser("prepare", help="build/download into the cache if needed; print the paths")
    prepare.add_argument(
        "which",
        nargs="?",
        default=ALL,
        choices=[m.value for m in EmbeddedModel] + [ALL],
        help="which model (default: all)",
    )
    prepare.add_argument("--force", action="store_true", help="rebuild even if a current build is cached")
    prepare.set_defaults(handler=run_prepare)

    listing = actions.add_parser("list", help="show each embedded model, whether it is ready, and its path")
    add_json_print(listing, "one object per model")
    listing.set_defaults(handler=run_list)


def run_prepare(args: argparse.Namespace) -> int:
    chosen = list(EmbeddedModel) if args.which == ALL else [EmbeddedModel(args.which)]
    for model in chosen:
        before = embedded_models.status(model)
        verb = "rebuilding" if args.force else ("checking" if before.ready else "preparing")
        print(f"{verb} {model.value}: {before.summary}", file=sys.stderr, flush=True)
        started = time.perf_counter()
        path = embedded_models.prepare(model, force=args.force)
        note = "cached" if before.ready and not args.force else f"built in {time.perf_counter() - started:.1f} s"
        print(f"{model.value}: {note}", file=sys.stderr, flush=True)
        print(path, flush=True)
    return 0


def run_list(args: argparse.Namespace) -> int:
    for item in embedded_models.list_models():
        if args.json:
            row = {"model": item.model.value, "ready": item.ready, "path": str(item.path), "summary": item.summary}
            print(json.dumps(row))
        else:
            state = "ready" if item.ready else "missing"
            print(f"{item.model.value:<8} {state:<8} {item.path}\n         {item.summary}")
    return 0
