"""Re-derive every cell of the kernel-selection table from vllm-ascend's source and compare.

    python -m scripts.kernel_truth --mirror /work/.mirror/vllm-project+vllm-ascend/repo \
        --out docs/kernel_truth            # writes audit.json and audit.md, prints the counts

For every release of the verified matrix (ascend_backend/data/vllm_ascend_releases.json) and main, every
chip family vllm-ascend knows at that tag, every op of the table, the graph modes and calls that matter
(attention: NONE / PIECEWISE / FULL / FULL_DECODE_ONLY with and without pa_shape_list, head sizes 128,
192 and 512; rotary: neox / GPT-J, full / partial; M-RoPE sections), the audit

1. walks vllm-ascend's code at that tag from the layer or backend vllm-ascend registers (`probes.py`)
   and collects the calls the op makes (`trace.py`, under the cell's facts, `facts.py`);
2. asks `ascend_backend.platform.kernels.select()` what the table runs for the same cell;
3. compares: the kernel (vllm-ascend's own `_C_ascend` / Triton default compared through its torch_npu
   fallback, which the row must name), the arguments (both calls bound to op-plugin's declared schema
   for the release's torch_npu), the conditions (a default of the cell that, flipped, changes the
   kernel, or a condition nothing decides), and chips vllm-ascend does not know at that tag.

Disagreements are counted by kind: different kernel, different arguments, different tag (the table has
vllm-ascend's kernels but changes at another release), missing condition, own kernel undeclared. A row's
`differs` field acknowledges a deliberate difference; the report lists those with the reason.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from scripts.kernel_truth.cells import CHIPS, TagInfo, cells, matrix, ops_to_audit, table_choice
from scripts.kernel_truth.compare import Finding, compare, reclassify_tags
from scripts.kernel_truth.mirror import Mirror
from scripts.kernel_truth.report import render, write
from scripts.kernel_truth.vllm_side import Auditor

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------------- driver
def audit(
    mirror: Mirror, tags: list[TagInfo], ops: list[str], chips: tuple[str, ...] = CHIPS, progress=None
) -> tuple[list[Finding], Auditor]:
    auditor = Auditor(mirror, tags)
    findings = []
    for n, tag in enumerate(tags):
        started = time.time()
        for op in ops:
            for chip in chips:
                for cell in cells(op, tag, chip):
                    side = auditor.vllm(tag, cell)
                    choice = table_choice(tag, cell)
                    if choice is None:
                        continue
                    findings.append(compare(tag, cell, side, choice))
        if progress:
            progress(f"[{n + 1}/{len(tags)}] {tag.label}: {time.time() - started:.1f}s, {auditor.walks} walks so far")
    reclassify_tags(findings)
    return findings, auditor


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.kernel_truth", description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, help="git directory of a vllm-ascend clone (bare or not)")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "docs" / "kernel_truth", help="where audit.json / audit.md go"
    )
    parser.add_argument("--tags", nargs="*", help="only these refs (v0.13.0 ... main); default: the matrix and main")
    parser.add_argument("--ops", nargs="*", help="only these ops; default: every op of the table")
    parser.add_argument(
        "--render",
        action="store_true",
        help="rewrite audit.md (and the stored form of audit.json) from --out's audit.json",
    )
    args = parser.parse_args(argv)
    if args.render:
        render(args.out, json.loads((args.out / "audit.json").read_text()))
        print(f"rewrote {args.out / 'audit.md'} and {args.out / 'audit.json'}")
        return 0
    if args.mirror is None:
        parser.error("--mirror is required (except with --render)")
    started = time.time()
    mirror = Mirror(args.mirror)
    tags = matrix(mirror, args.tags)
    findings, auditor = audit(
        mirror, tags, args.ops or ops_to_audit(), progress=lambda m: print(m, file=sys.stderr, flush=True)
    )
    summary = write(args.out, findings, tags, mirror, time.time() - started)
    print(json.dumps(summary, indent=1))
    print(
        f"wrote {args.out / 'audit.md'} and {args.out / 'audit.json'} ({auditor.walks} walks, {time.time() - started:.0f} s)"
    )
    return 0
