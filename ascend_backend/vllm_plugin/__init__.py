"""vLLM general plugin: run vLLM's custom ops and CPU attention through `ascend_backend.registry`.

Loaded by vLLM in every process (API server, EngineCore, workers) through the entry point

    [project.entry-points."vllm.general_plugins"]
    ascend_backend = "ascend_backend.vllm_plugin:register"

What `register()` does in each process:
1. decides what to take over on this platform (`platform_plan`; on an Ascend NPU vllm-ascend keeps
   everything);
2. installs out-of-tree overrides for RMSNorm (plain and with residual), SiluAndMul, RotaryEmbedding,
   GELU and GELUTanh (`custom_ops`), each calling registry ops, through opaque torch ops under
   torch.compile (`torch_ops`);
3. re-points vLLM's CPU_ATTN backend at a subclass whose cache write and attention are registry ops
   (`attention`, `paged_kernels`);
4. on CPU, registers vLLM's C++ kernels for the cache write, attention, RoPE and RMSNorm as the
   registry's `vllm_cpu` backend (`vllm_kernels`), so by default the engine runs compiled kernels
   under the registry's counters and faults; ASCEND_BACKEND_FORCE_NATIVE=<ops or *> runs our native
   PyTorch kernels instead;
5. arms the faults named in ASCEND_BACKEND_FAULT (e.g. 'rms_norm:nan:call=5', or
   'add_rms_norm:scale:factor=1.2:module=model.layers.2.*' in an eager engine, whose modules then carry
   their names: `module_names`), so a workbench tool can break exactly one op inside a real server;
   ASCEND_BACKEND_PLANTED='step_sleep:ms=5' plants a host sleep before every forward step (`planted`);
6. when ASCEND_BACKEND_STATS_FILE=<prefix> is set, keeps `<prefix>.<pid>.json` up to date with op call
   counts (`stats`; read them with `stats.read_op_stats(prefix)`);
7. when ASCEND_BACKEND_DUMP is set, records module outputs of the engine's model for its first forward
   steps in the workbench dump format (`dump`), on every platform (vllm-ascend's engines included);
8. lets the NPU kernel selection read the engine's config (`ascend_backend.platform.kernels.engine`): the
   effective cudagraph_mode / enforce_eager / additional_config (torchair, xlite, pa_shape_list) and the
   model's architecture, as vllm-ascend's platform left them.

Switches: `VLLM_PLUGINS` (vLLM's allow-list; `VLLM_PLUGINS=""` loads no plugin) and
ASCEND_BACKEND_DISABLED_OPS (op names such as `rms_norm,attention`, or `all`) to keep vLLM's own layer
for some ops. Fault specs with `module=` match vLLM's module names in an eager engine only (a compiled one
logs a warning; select the call with `call=N` there).
"""

from __future__ import annotations

import functools
import logging

from ascend_backend import envs
from ascend_backend.registry import REGISTRY, FaultHandle

logger = logging.getLogger("vllm.ascend_backend")


def register() -> None:
    """vLLM's entry point; safe to call more than once in a process."""
    from ascend_backend.vllm_plugin.platform_plan import detect_platform, plan_registration

    REGISTRY.load_builtin_ops()  # every op now, not inside the engine's first forward step
    from ascend_backend.platform.kernels import engine

    engine.set_provider(current_vllm_config)
    disabled = envs.ASCEND_BACKEND_DISABLED_OPS
    plan = plan_registration(detect_platform(), disabled)
    installed = []
    if plan.layer_overrides:
        from ascend_backend.vllm_plugin.custom_ops import InstallStatus, install_layer_overrides

        for result in install_layer_overrides(disabled):
            if result.status is InstallStatus.TAKEN:
                logger.warning("ascend_backend: %s not overridden: %s owns it", result.layer, result.detail)
            elif result.status is not InstallStatus.DISABLED:
                installed.append(result.layer)
    if plan.attention:
        install_attention_backend()
        installed.append("CPU_ATTN")
    kernels = "none"
    if plan.vllm_kernels:
        from ascend_backend.vllm_plugin import vllm_kernels

        kernels = ", ".join(f"{op}->{REGISTRY.select(op, 'cpu').backend.value}" for op in vllm_kernels.install())
    faults = arm_faults_from_env(envs.ASCEND_BACKEND_FAULT)
    if envs.ASCEND_BACKEND_PLANTED:  # a planted host cost for the performance twin (vllm_plugin.planted)
        from ascend_backend.vllm_plugin.planted import install as install_planted

        install_planted(envs.ASCEND_BACKEND_PLANTED)
    prefix = envs.ASCEND_BACKEND_STATS_FILE
    if prefix:
        start_stats_writer(prefix)
    dump_spec = envs.ASCEND_BACKEND_DUMP
    if dump_spec:
        from ascend_backend.vllm_plugin.dump import install_dump_hook

        install_dump_hook(dump_spec)
    logger.info(
        "ascend_backend plugin: %s; overrides: %s; kernels: %s; faults: %s; stats: %s; dump: %s",
        plan.note,
        ", ".join(installed) or "none",
        kernels,
        "; ".join(f"{h.spec.op}:{h.spec.kind.value}" for h in faults) or "none",
        prefix or "off",
        dump_spec or "off",
    )


def current_vllm_config():
    """The engine's VllmConfig while vLLM has one set, else None (read-only use of vLLM's config)."""
    from vllm import config

    getter = getattr(config, "get_current_vllm_config_or_none", None)
    return getter() if getter is not None else config.get_current_vllm_config()


def install_attention_backend() -> None:
    """Point vLLM's CPU_ATTN at our subclass, unless another plugin already re-pointed it."""
    from vllm.v1.attention.backends.registry import AttentionBackendEnum, register_backend

    from ascend_backend.vllm_plugin.attention import BACKEND_PATH

    cpu_attn = AttentionBackendEnum.CPU_ATTN
    if cpu_attn.is_overridden() and cpu_attn.get_path() != BACKEND_PATH:
        logger.warning("ascend_backend: CPU_ATTN already overridden by %s; leaving it", cpu_attn.get_path())
        return
    register_backend(cpu_attn, BACKEND_PATH)


def uninstall() -> None:
    """Undo the layer overrides, vLLM's kernels in the registry and the attention re-pointing in this process."""
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    from ascend_backend.vllm_plugin import vllm_kernels
    from ascend_backend.vllm_plugin.attention import BACKEND_PATH
    from ascend_backend.vllm_plugin.custom_ops import uninstall_layer_overrides

    uninstall_layer_overrides()
    vllm_kernels.uninstall()
    if AttentionBackendEnum.CPU_ATTN.get_path() == BACKEND_PATH:
        AttentionBackendEnum.CPU_ATTN.clear_override()


# Cached per spec text so a second register() in the same process does not arm the faults twice.
@functools.cache
def arm_faults_from_env(spec_text: str) -> tuple[FaultHandle, ...]:
    if not spec_text:
        return ()
    handles = tuple(REGISTRY.arm_from_env())
    if any(handle.spec.module is not None for handle in handles):
        from ascend_backend.vllm_plugin.module_names import install_module_names_hook

        install_module_names_hook()  # vLLM's layers carry no names of their own
    return handles


# One writer per prefix per process (fork children restart theirs through its fork hook).
@functools.cache
def start_stats_writer(prefix: str):
    from ascend_backend.vllm_plugin.stats import StatsFileWriter

    return StatsFileWriter(prefix).start()


__all__ = [
    "arm_faults_from_env",
    "current_vllm_config",
    "install_attention_backend",
    "register",
    "start_stats_writer",
    "uninstall",
]
