"""`ascend-workbench plan`: memory per rank of a layout before any start, and what fits (docs/METHOD.md §20).

    ascend-workbench plan --model /models/Qwen3-14B --chips 1x910B3 --layout tp=1 --max-model-len 32768
    ascend-workbench plan --model kimi-k2/ --chips 2x8x910B3 --layout tp=8,dp=2,ep=16 --weight-bits 4
    ascend-workbench plan --model tiny --chips 2xcpu --layout tp=2 --kv-cache-gib 1

Exit 1 when the layout does not fit (the message names the knob and the number), 0 otherwise.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.verbs._common import add_json_out

HELP = "memory per rank of a tp/dp/ep/pp layout, the largest context and batch that fit, or which knob to turn"
DESCRIPTION = (
    "Plan a layout from the model's config.json before anything starts: weights per rank (what data "
    "parallelism replicates, what expert parallelism splits), KV cache, graph capture, HCCL buffers and the "
    "KV connector's memory; the largest context and batch that fit. A layout that does not fit is refused "
    "naming the knob and the number. Figures: policy/cluster/planner.yaml."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", required=True, help="an embedded model (tiny, smollm2), a model directory or its config.json"
    )
    parser.add_argument(
        "--chips", required=True, help="NODESxCHIPSxKIND (2x8x910B3), CHIPSxKIND (16x910B3) or NxCPU (2xcpu)"
    )
    parser.add_argument("--layout", default="tp=1", help="tp=N,dp=N,ep=N,pp=N (ep=tp*dp turns on expert parallelism)")
    parser.add_argument("--pd", action="store_true", help="a prefill/decode instance: count the KV connector's memory")
    parser.add_argument(
        "--connector", help="the KV connector with --pd (default MooncakeConnector; ExampleConnector on CPU)"
    )
    parser.add_argument("--max-model-len", type=int, help="the context each request may use (vLLM's --max-model-len)")
    parser.add_argument(
        "--gpu-memory-utilization", type=float, default=0.9, help="vLLM's fraction of chip memory (default 0.9)"
    )
    parser.add_argument(
        "--kv-cache-gib", type=float, help="a fixed KV budget per rank (the CPU engine's VLLM_CPU_KVCACHE_SPACE)"
    )
    parser.add_argument("--block-size", type=int, help="KV block size (default 128 on NPUs, 32 on the CPU engine)")
    parser.add_argument("--dtype", help="weights and KV dtype (default: the model's)")
    parser.add_argument("--weight-bits", type=int, help="quantized linear weights: 8 (W8A8) or 4 (W4A8)")
    parser.add_argument("--enforce-eager", action="store_true", help="no graph capture")
    parser.add_argument("--hccl-buffsize", type=int, metavar="MB", help="HCCL_BUFFSIZE (default 200)")
    parser.add_argument("--max-num-seqs", type=int, default=256, help="vLLM's --max-num-seqs (default 256)")
    parser.add_argument(
        "--max-num-batched-tokens", type=int, default=8192, help="vLLM's --max-num-batched-tokens (default 8192)"
    )
    parser.add_argument("--figures", type=Path, help="planner figures (default policy/cluster/planner.yaml)")
    add_json_out(parser, "the plan")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from workbench.cluster.api import PlanRequest, run_plan

    request = PlanRequest(
        args.model,
        args.chips,
        args.layout,
        args.pd,
        args.connector,
        args.max_model_len,
        args.gpu_memory_utilization,
        args.kv_cache_gib,
        args.block_size,
        args.dtype,
        args.weight_bits,
        args.enforce_eager,
        args.hccl_buffsize,
        args.max_num_seqs,
        args.max_num_batched_tokens,
        args.figures,
        args.json,
    )
    plan = run_plan(request)
    print(plan.text())
    if args.json:
        print(f"json: {args.json}")
    return 0 if plan.fits else 1
