"""One NPU test run in a fresh process: a kernel family (a vllm-ascend release's calls), one dtype, each op.

    python -m tests.npu.worker --override release=0.10.2rc1,chip=A2 --dtype bfloat16 --group attention

Why a process per run: some kernels keep state for the whole process (`_npu_rotary_embedding`'s cos/sin,
op-plugin RopeAtb.cpp), so results must not depend on what ran before. The override goes into
ASCEND_BACKEND_KERNELS before ascend_backend is imported. For every op and case the worker prints one
JSON line: the backend the registry counted (the NPU kernel ran, or the table sent the call native),
which torch_npu functions were called (the real functions, counted on the way through), the kernel the
table chose, the largest error against native float32 on the CPU from the same rounded inputs, and
whether the caller's input tensors were left unchanged.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter

ATTENTION_OPS = (
    "reshape_and_cache",
    "prefill_attention",
    "prefill_cache_hit_attention",
    "paged_decode_attention",
    "chunked_prefill_attention",
)
TOKEN_OPS = ("rms_norm", "add_rms_norm", "gemma_rms_norm", "gemma_add_rms_norm", "silu_and_mul", "quick_gelu")


def count_torch_npu_calls(counter: Counter) -> None:
    """Wrap each torch_npu function a recipe can call so calls are counted, then run the real one."""
    import torch_npu

    from ascend_backend.platform import device
    from ascend_backend.platform.kernels import RECIPES, calls

    device.atb_status()  # op-plugin swaps its lazy ATB wrappers for the real ops on first load: do it first
    for name in {call for recipes in RECIPES.values() for kernel in recipes.values() for call in calls(kernel)}:
        real = getattr(torch_npu, name, None)
        if real is None:
            continue

        def counted(*args, _real=real, _name=name, **kwargs):
            counter[_name] += 1
            return _real(*args, **kwargs)

        setattr(torch_npu, name, counted)


def _attention_inputs(op: str, head: int):
    """The self-test's attention inputs (workbench.selftest.cases): block 128 and cached prefixes in whole
    blocks, the shape a serving engine hands these kernels and the ATB prefix encoder requires."""
    from ascend_backend.platform.kernels import ChipFamily
    from workbench.selftest.cases import item_inputs
    from workbench.selftest.plan import KernelItem

    item = KernelItem(op, "-", "-", ChipFamily.A2, "-", "-", (("head_size", (head,)),), False)
    return item_inputs(item, seed=head)


def _rotary_inputs(head: int, rotary_dim: int, base: float):
    import torch

    from ascend_backend.ops import build_cos_sin_cache
    from workbench.accuracy.op_inputs import OpInputs

    g = torch.Generator().manual_seed(head + rotary_dim)
    positions = torch.randint(0, 4096, (9,), generator=g)
    query, key = torch.randn(9, 4 * head, generator=g), torch.randn(9, 2 * head, generator=g)
    return OpInputs((positions, query, key, head, build_cos_sin_cache(rotary_dim, 4096, base=base), True))


def cases(group: str, heads: list[int]) -> list[tuple[str, object, dict]]:
    from workbench.accuracy.op_inputs import make_inputs

    if group == "attention":
        return [(op, _attention_inputs(op, h), {"head_size": h}) for h in heads for op in ATTENTION_OPS]
    if group == "tokens":
        return [(op, make_inputs(op, {"tokens": 16, "hidden": 512}, seed=0), {}) for op in TOKEN_OPS]
    # rotary: several caches in one process on purpose (head sizes, a partial rotary, a second base)
    found = [("rotary_embedding", _rotary_inputs(h, h, 10000.0), {"head_size": h, "rotary_dim": h}) for h in heads]
    found.append(
        ("rotary_embedding", _rotary_inputs(heads[-1], heads[-1], 500000.0), {"head_size": heads[-1], "base": 5e5})
    )
    found.append(("rotary_embedding", _rotary_inputs(128, 64, 10000.0), {"head_size": 128, "rotary_dim": 64}))
    found.append(("mrope", make_inputs("mrope", {"tokens": 9, "hidden": 1024}, seed=0), {"head_size": 128}))
    return found


def run_case(op: str, inputs, facts: dict, dtype, counter: Counter, device: str = "npu:0") -> dict:
    import torch

    from ascend_backend.platform import kernels
    from ascend_backend.platform.kernels import CallFacts
    from ascend_backend.registry import REGISTRY, Backend

    rounded = inputs.to("cpu", dtype).to("cpu", torch.float32)
    expected = rounded.outputs(REGISTRY.impl(op, Backend.NATIVE)(*rounded.args))
    on_npu = inputs.to(device, dtype)
    before = [a.clone() if isinstance(a, torch.Tensor) else a for a in on_npu.args]
    REGISTRY.reset_stats()
    counter.clear()
    actual = on_npu.outputs(REGISTRY.dispatch(op, device, *on_npu.args))
    if device.startswith("npu"):
        torch.npu.synchronize()
    unchanged = all(
        not isinstance(a, torch.Tensor) or i in on_npu.written_args or torch.equal(a, b)
        for i, (a, b) in enumerate(zip(on_npu.args, before))
    )
    err = max(float((x.cpu().float() - e.float()).abs().max()) for x, e in zip(actual, expected))
    head = facts.get("head_size", 128)
    call = CallFacts(head_size=head, rotary_dim=facts.get("rotary_dim", head), neox=True, mrope_section=(16, 24, 24))
    choice = kernels.choose(op, call)
    return {
        "op": op,
        "facts": facts,
        "counts": REGISTRY.stats().get(op, {}),
        "torch_npu_calls": dict(counter),
        "table_kernel": choice.kernel,
        "row": choice.row.id if choice.row else None,
        "max_abs_err": err,
        "unchanged": unchanged,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--override", required=True, help="ASCEND_BACKEND_KERNELS value for this process")
    parser.add_argument("--dtype", required=True, choices=["float16", "bfloat16", "float32"])
    parser.add_argument("--group", required=True, choices=["attention", "tokens", "rotary"])
    parser.add_argument("--heads", default="64,128")
    parser.add_argument("--device", default="npu:0", help="cpu checks this harness where there is no NPU")
    args = parser.parse_args()
    os.environ["ASCEND_BACKEND_KERNELS"] = args.override

    import torch

    import ascend_backend  # noqa: F401 - registers every op

    counter: Counter = Counter()
    if args.device.startswith("npu"):
        count_torch_npu_calls(counter)
    dtype = getattr(torch, args.dtype)
    for op, inputs, facts in cases(args.group, [int(h) for h in args.heads.split(",")]):
        print("RESULT " + json.dumps(run_case(op, inputs, facts, dtype, counter, args.device)), flush=True)


if __name__ == "__main__":
    main()
