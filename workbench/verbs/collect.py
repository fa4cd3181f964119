"""`ascend-workbench collect`: one node bundle per node, for `check --cluster` (docs/METHOD.md §20).

ascend-workbench collect --out node0.json                         # on a node: its running vLLM serve / ray start
ascend-workbench collect --out node1.json --script launch.sh      # before starting: the launch script it will run
ascend-workbench collect --out n2.json --node n2 --from-files n2/ # files copied off a node (docs/cluster.md)
ascend-workbench collect --out bundles/ --ray auto                # every node of a Ray cluster, one task each
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "gather a node bundle (stack, npu-smi, hccn_tool, hccn.conf, env, command, ports) for check --cluster"
DESCRIPTION = (
    "Write what the cluster check needs to know about a node into one file: the stack, `npu-smi info`, "
    "`hccn_tool` outputs, /etc/hccn.conf, the environment, the serve or `ray start` command line, listening "
    "ports and interfaces. Run it on each node, point it at files copied off a node, or let one Ray task per "
    "node gather them all (docs/cluster.md)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="PATH",
        help="the bundle file to write (a folder with --ray: one NODE.json per node)",
    )
    parser.add_argument("--node", metavar="NAME", help="the node's name in findings (default: its host name)")
    parser.add_argument(
        "--pid",
        type=int,
        metavar="PID",
        help="the vLLM serve or ray start process (default: the only one running here)",
    )
    parser.add_argument(
        "--script",
        type=Path,
        metavar="FILE",
        help="the node's launch script (exports and the serve line) instead of a running process",
    )
    parser.add_argument(
        "--from-files",
        type=Path,
        metavar="DIR",
        help="a folder of files copied off a node: collect_env.txt, npu-smi.txt, hccn.conf, "
        "hccn/<device>.<query>.txt, env.txt, launch.sh",
    )
    parser.add_argument(
        "--ray", metavar="ADDRESS", help="gather every node of this Ray cluster ('auto' on one of its nodes)"
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from workbench.cluster.api import CollectRequest, run_collect

    request = CollectRequest(args.out, args.node, args.pid, args.script, args.from_files, args.ray)
    print(run_collect(request).text())
    return 0
