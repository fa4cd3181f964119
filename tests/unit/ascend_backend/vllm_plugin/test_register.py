"""`register()` in this process: what it installs, that it is idempotent, and that it can be undone."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("vllm")

from vllm.model_executor.custom_op import op_registry_oot  # noqa: E402
from vllm.v1.attention.backends.registry import AttentionBackendEnum  # noqa: E402

from ascend_backend import vllm_plugin  # noqa: E402
from ascend_backend.registry import REGISTRY, Backend  # noqa: E402
from ascend_backend.vllm_plugin.attention import BACKEND_PATH, AscendBackendAttentionBackend  # noqa: E402
from ascend_backend.vllm_plugin.custom_ops import LAYER_OVERRIDES  # noqa: E402

KERNEL_OPS = ("rms_norm", "add_rms_norm", "rotary_embedding", "vllm_cpu_kv_write", "vllm_cpu_paged_attention")


@pytest.fixture
def clean_plugin_state(monkeypatch):
    for name in ("ASCEND_BACKEND_FAULT", "ASCEND_BACKEND_DISABLED_OPS", "ASCEND_BACKEND_STATS_FILE"):
        monkeypatch.delenv(name, raising=False)
    vllm_plugin.uninstall()
    yield monkeypatch
    vllm_plugin.uninstall()
    REGISTRY.reset_stats()


def test_register_installs_layers_and_attention_once_and_uninstall_undoes_it(clean_plugin_state):
    vllm_plugin.register()
    vllm_plugin.register()  # vLLM may load general plugins more than once per process
    assert all(op_registry_oot[o.layer] is o.cls for o in LAYER_OVERRIDES)
    assert AttentionBackendEnum.CPU_ATTN.get_path() == BACKEND_PATH
    assert AttentionBackendEnum.CPU_ATTN.get_class() is AscendBackendAttentionBackend
    for op in KERNEL_OPS:  # vLLM's C++ kernels serve these by default inside a CPU engine
        assert REGISTRY.select(op, "cpu").backend is Backend.VLLM_CPU
    vllm_plugin.uninstall()
    assert not any(o.layer in op_registry_oot for o in LAYER_OVERRIDES)
    assert not AttentionBackendEnum.CPU_ATTN.is_overridden()
    for op in KERNEL_OPS:
        assert Backend.VLLM_CPU not in REGISTRY.entry(op).impls


def test_disabled_ops_env_keeps_vllm_attention_and_norm(clean_plugin_state):
    clean_plugin_state.setenv("ASCEND_BACKEND_DISABLED_OPS", "attention,rms_norm")
    vllm_plugin.register()
    assert "RMSNorm" not in op_registry_oot and "SiluAndMul" in op_registry_oot
    assert not AttentionBackendEnum.CPU_ATTN.is_overridden()


def test_fault_env_is_armed_once_per_process(clean_plugin_state):
    spec = "rms_norm:nan:call=2"
    clean_plugin_state.setenv("ASCEND_BACKEND_FAULT", spec)
    vllm_plugin.register()
    vllm_plugin.register()
    handles = vllm_plugin.arm_faults_from_env(spec)
    try:
        REGISTRY.reset_stats()
        x, w = torch.randn(2, 8), torch.ones(8)
        outs = [REGISTRY.dispatch("rms_norm", "cpu", x, w, 1e-6) for _ in range(3)]
        assert [bool(o.isnan().any()) for o in outs] == [False, True, False]
        assert REGISTRY.stats()["rms_norm"] == {"native": 3, "faulted": 1}  # armed twice would fault twice
    finally:
        for handle in handles:
            REGISTRY.disarm(handle)
        vllm_plugin.arm_faults_from_env.cache_clear()


def test_the_entry_point_registers_every_op_in_a_fresh_process():
    # vLLM loads the plugin through its entry point and nothing else: the registry must be complete after it.
    # The child reads the table as register() left it (`_ops`): `ops()` would load the built-in ops itself.
    import json
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    code = (
        "import json\n"
        "from importlib import metadata\n"
        "(entry,) = [e for e in metadata.entry_points(group='vllm.general_plugins') if e.name == 'ascend_backend']\n"
        "entry.load()()\n"
        "from ascend_backend.registry import REGISTRY\n"
        "print(json.dumps({op: sorted(b.value for b in REGISTRY.entry(op).impls) for op in REGISTRY._ops}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    registered = json.loads(done.stdout.strip().splitlines()[-1])
    for op in REGISTRY.ops():
        if op in KERNEL_OPS or op.startswith("vllm_cpu_"):
            continue
        assert registered[op] == sorted(b.value for b in REGISTRY.entry(op).impls if b is not Backend.VLLM_CPU), op
    for op in KERNEL_OPS:
        assert "vllm_cpu" in registered[op] and "native" in registered[op], op


def test_a_fault_naming_a_module_fires_there_only_once_the_loader_named_the_modules():
    """ASCEND_BACKEND_FAULT with module=: the plugin's loader wrapper names the target model's modules."""
    from types import SimpleNamespace

    from ascend_backend.vllm_plugin.loader_hook import on_target_model_load
    from ascend_backend.vllm_plugin.module_names import name_modules

    class Norm(torch.nn.Module):
        def forward(self, x):
            return REGISTRY.dispatch("rms_norm", x.device, x, torch.ones(x.shape[-1]), 1e-6)

    model = torch.nn.Sequential(Norm(), Norm())

    class Loader:
        def load_model(self, vllm_config, model_config):
            return model

    def config(eager: bool):
        model_config = SimpleNamespace(enforce_eager=eager)
        return SimpleNamespace(model_config=model_config), model_config

    on_target_model_load(Loader, name_modules)
    x = torch.randn(2, 4)
    with REGISTRY.inject("rms_norm", "zero", module="1") as fault:
        model(x)
        assert fault.fired == 0  # vLLM's modules carry no names until the loader names them
        assert Loader().load_model(*config(eager=True)) is model
        out = model(x)
    assert fault.fired == 1 and bool((out == 0).all())
    compiled = torch.nn.Sequential(Norm())
    Loader.load_model = lambda self, vllm_config, model_config: compiled
    on_target_model_load(Loader, name_modules)
    Loader().load_model(*config(eager=False))
    assert not compiled[0]._forward_pre_hooks  # no hooks in a compiled engine: the fault cannot be placed
