"""`ascend-workbench import PATH...`: read a GPU vLLM service's deployment as written, pick the vllm-ascend
release from it, and (with --to-ascend OUT/) write the Ascend counterpart of every file it read.

    ascend-workbench import deploy/                          # the engine containers and their settings, file:line
    ascend-workbench import rendered.yaml --to-ascend ported/ # + the ported files, a diff each, linted at the release
    ascend-workbench import compose.yaml --env LLM_MODEL_ID=Qwen/Qwen2.5-7B-Instruct --release v0.13.0
    ascend-workbench import worker/ --convention env-flags.yaml --json import.json

Exit 0: read (and ported files lint clean); 1: a ported engine container still has lint errors at the
release; 2: a user error (no such path, a vLLM version given as --release, YAML that does not parse).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.verbs._common import add_json_out

HELP = "read a deployment as written (scripts, Dockerfiles, compose, k8s, helm output, --config) -> recipes, release, ported files"
DESCRIPTION = (
    "Read the engine containers of a vLLM service from its deployment files: `vllm serve` / api_server command "
    "lines in scripts and Dockerfiles (ARG/ENV resolved), `docker run`, compose files, Kubernetes manifests "
    "(Deployments, StatefulSets, LeaderWorkerSets, Jobs; multi-document), `helm template` output, `vllm serve "
    "--config` YAML, LLM(...) calls and the environment-to-flag conventions the service declares. Each setting is "
    "traced to its file and line; a vllm-ascend release is picked from the vLLM version, models and features the "
    "service runs; each container becomes a serving recipe; --to-ascend writes the ported files with a diff each "
    "(docs/METHOD.md §1, §2)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="+", type=Path, metavar="PATH", help="deployment files or the service's directory"
    )
    parser.add_argument(
        "--release", metavar="TAG", help="judge and port at this vllm-ascend release (default: picked from the service)"
    )
    parser.add_argument(
        "--to-ascend",
        type=Path,
        metavar="OUT",
        help="write the ported files (and recipes/) under OUT, outside the inputs",
    )
    parser.add_argument(
        "--values",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a Helm values file for charts rendered here (repeatable)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a variable the shell would give compose files and scripts (repeatable)",
    )
    parser.add_argument(
        "--convention",
        type=Path,
        metavar="FILE",
        help="an environment-to-flag mapping file (flags: {MAX_MODEL_LEN: --max-model-len})",
    )
    parser.add_argument(
        "--npu-resource", metavar="NAME", help="the NPU resource of your device plugin (default huawei.com/Ascend910)"
    )
    parser.add_argument("--no-diff", action="store_true", help="list the changes without printing the diffs")
    add_json_out(parser, "the containers, settings, release, recipes and ported files (kind 'import')")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from workbench.deploy import api as deploy

    request = deploy.ImportRequest(
        paths=tuple(args.paths),
        release=args.release,
        to_ascend=args.to_ascend,
        values=tuple(args.values),
        env=tuple(args.env),
        convention=args.convention,
        npu_resource=args.npu_resource,
    )
    result = deploy.run_import(request)
    print(result.text(diffs=not args.no_diff))
    if args.json:
        print(f"json: {result.write(args.json)}")
    return 0 if result.clean() else 1
