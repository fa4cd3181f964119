"""What makes a twin run reproducible, recorded with it: seeds, determinism switches, batch composition.

A divergence means something only if a repeat of the same configuration does not diverge as much, so the
run writes down everything that decides whether it would: the request seed and the engine's `--seed`,
the batch composition (prompts per request, the engine's `max_num_seqs`), and the environment switches
that make reductions deterministic. On an Ascend NPU, collective reductions (HCCL/LCCL) and some ATB
matmuls are not deterministic unless switched so; vllm-ascend's FAQ names the switches
(vllm-project/vllm-ascend PR #2334: `HCCL_DETERMINISTIC=true`, `LCCL_DETERMINISTIC=1`,
`ATB_MATMUL_SHUFFLE_K_ENABLE=0`, `ATB_LLM_LCOC_ENABLE=0`) and its batch-invariance mode sets
`HCCL_DETERMINISTIC=strict` (PR #11824); vLLM has `VLLM_BATCH_INVARIANT=1`. A run that leaves them unset on an
NPU gets a note, because its noise repeat then measures real run-to-run variation.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from workbench.twin.sides import Side

# Switch -> what it does; recorded whether set or not (unset is recorded as None).
SWITCHES: dict[str, str] = {
    "HCCL_DETERMINISTIC": "deterministic HCCL collectives (true / strict) on Ascend",
    "LCCL_DETERMINISTIC": "deterministic LCCL collectives (1) on Ascend",
    "ATB_MATMUL_SHUFFLE_K_ENABLE": "ATB matmul K shuffling (0 = off, deterministic)",
    "ATB_LLM_LCOC_ENABLE": "ATB compute-communication overlap (0 = off, deterministic)",
    "VLLM_ASCEND_USE_DETERMINISTIC_ALGORITHMS": "vllm-ascend: torch deterministic algorithms",
    "VLLM_BATCH_INVARIANT": "vLLM batch-invariant kernels (1)",
    "CUBLAS_WORKSPACE_CONFIG": "deterministic cuBLAS on the GPU the service moves from",
    "PYTHONHASHSEED": "Python's hash seed",
}
_RECORDED_PREFIXES = ("VLLM_", "HCCL_", "LCCL_", "ATB_", "ASCEND_BACKEND_")
NPU_SWITCHES = ("HCCL_DETERMINISTIC", "LCCL_DETERMINISTIC")


def _engine_seed(side: Side) -> int | None:
    """The `--seed` a launched side passes its engine (vLLM's default is 0), None for an attached server."""
    if side.recipe is None:
        return None
    args = list(side.recipe.engine.extra_args)
    return int(args[args.index("--seed") + 1]) if "--seed" in args[:-1] else 0


def side_record(side: Side, launch_env: Mapping[str, str] | None, request_seed: int) -> dict[str, Any]:
    """One side's reproducibility record: seeds, switches, the recorded environment, the batch composition."""
    env = {**os.environ, **(launch_env or {})} if side.launched else {}
    recorded = {k: v for k, v in sorted((launch_env or {}).items()) if k.startswith(_RECORDED_PREFIXES)}
    max_num_seqs = side.recipe.engine.max_num_seqs if side.recipe is not None else None
    return {
        "side": side.label,
        "request_seed": request_seed,
        "engine_seed": _engine_seed(side),
        "batch": side.batch,
        "max_num_seqs": max_num_seqs,
        "switches": {name: env.get(name) for name in SWITCHES} if side.launched else "unknown (attached server)",
        "environment": recorded,
    }


def notes(sides: tuple[Side, Side], records: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """What the user should know about reproducibility before reading the verdict."""
    found = []
    for side in sides:
        record = records.get(side.label, {})
        switches = record.get("switches")
        if side.recipe is not None and side.recipe.device.value == "npu" and isinstance(switches, dict):
            unset = [name for name in NPU_SWITCHES if not switches.get(name)]
            if unset:
                found.append(
                    f"side {side.label} runs on an NPU without {', '.join(unset)}: collective reductions may differ "
                    "run to run, so the noise repeat measures real variation (set them, or read divergences "
                    "against that noise)"
                )
        max_num_seqs = record.get("max_num_seqs")
        if max_num_seqs is not None and side.batch > max_num_seqs:
            found.append(
                f"side {side.label} sends {side.batch} prompts per request but its engine runs at most "
                f"{max_num_seqs} sequences at once (max_num_seqs): the batch it ran was smaller"
            )
    return found


__all__ = ["SWITCHES", "notes", "side_record"]
