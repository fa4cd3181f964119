"""What importing ascend_backend costs and guarantees: lazy attributes, a registry that loads its own ops.

Each case runs in a fresh interpreter, because this test process has long imported torch and every op.
ASCEND_BACKEND_LOG_LEVEL on a bare `import ascend_backend` is tests/unit/test_logging.py's.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tests.conftest import REPO_ROOT

# Every built-in op, and those with an NPU adapter (gelu, gelu_tanh and linear run aten on an NPU too).
NPU_OPS = {
    "add_rms_norm",
    "add_rms_norm_quant",
    "chunked_prefill_attention",
    "gemma_add_rms_norm",
    "gemma_rms_norm",
    "mrope",
    "paged_decode_attention",
    "prefill_attention",
    "prefill_cache_hit_attention",
    "quant_weight_layout",
    "quick_gelu",
    "reshape_and_cache",
    "rms_norm",
    "rotary_embedding",
    "silu_and_mul",
    "w8a8_dynamic_linear",
    "w8a8_linear",
}
BUILTIN_OPS = NPU_OPS | {"gelu", "gelu_tanh", "linear"}

# Makes torch unimportable in the child: importing it is then an error, not merely a slow side effect.
NO_TORCH = textwrap.dedent(
    """
    import sys
    class NoTorch:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch", "torch_npu"):
                raise ImportError("imported " + name)
    sys.meta_path.insert(0, NoTorch())
    """
)


def run(code: str, *, without_torch: bool = False) -> str:
    source = (NO_TORCH if without_torch else "") + textwrap.dedent(code)
    done = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def test_the_device_kinds_import_without_torch():
    out = run(
        """
        from ascend_backend.platform.kinds import DeviceKind, NpuStatus, NpuUnavailable
        status = NpuStatus(NpuUnavailable.NO_DEVICE, "none visible", "npu-smi info")
        print(DeviceKind("npu").name, status.available, "torch" in sys.modules)
        """,
        without_torch=True,
    )
    assert out == "NPU False False"


def test_importing_the_package_imports_no_torch_until_an_attribute_needs_it():
    out = run(
        """
        import json, sys
        import ascend_backend
        before = "torch" in sys.modules
        kinds = ascend_backend.device.DeviceKind  # the probe: imports torch
        print(json.dumps([before, "torch" in sys.modules, kinds.CPU.value]))
        """
    )
    assert json.loads(out) == [False, True, "cpu"]


def test_the_documented_calls_work_on_a_bare_import_and_the_table_is_complete():
    out = run(
        """
        import json
        import torch
        import ascend_backend
        table = ascend_backend.registry.describe("cpu")
        y = ascend_backend.ops.rms_norm(torch.ones(2, 8), torch.ones(8), 1e-6)
        status = ascend_backend.device.npu_status()
        npu = sorted(op for op in table["op"] if "npu" in table.set_index("op").loc[op, "registered"])
        print(json.dumps({"ops": sorted(table["op"]), "npu": npu, "y": y.shape[-1], "status": status.kind.name}))
        """
    )
    report = json.loads(out)
    assert report["ops"] == sorted(BUILTIN_OPS) and report["npu"] == sorted(NPU_OPS)
    assert report["y"] == 8 and report["status"]


def test_one_op_module_alone_reaches_every_implementation_of_its_op():
    out = run(
        """
        from ascend_backend.ops.norm import rms_norm
        from ascend_backend.registry import REGISTRY
        print(sorted(b.value for b in REGISTRY.entry("rms_norm").impls), REGISTRY.select("w8a8_linear", "cpu").op)
        """
    )
    assert out == "['native', 'npu'] w8a8_linear"


def test_the_first_use_from_many_threads_loads_the_built_in_ops_once():
    out = run(
        """
        import json, threading
        import torch
        from ascend_backend.registry import REGISTRY
        barrier, results, errors = threading.Barrier(8), [], []
        def first_use(i):
            barrier.wait()
            try:
                if i % 2:
                    results.append(tuple(REGISTRY.ops()))
                else:
                    REGISTRY.dispatch("silu_and_mul", "cpu", torch.ones(2, 4))
                    results.append(tuple(REGISTRY.ops()))
            except Exception as exc:  # a second import of a module would raise 'already has an implementation'
                errors.append(repr(exc))
        threads = [threading.Thread(target=first_use, args=(i,)) for i in range(8)]
        for t in threads: t.start()
        for t in threads: t.join()
        print(json.dumps({"distinct": len(set(results)), "count": len(results), "errors": errors,
                          "ops": len(results[0]) if results else 0, "calls": REGISTRY.stats()["silu_and_mul"]}))
        """
    )
    report = json.loads(out)
    assert report == {"distinct": 1, "count": 8, "errors": [], "ops": len(BUILTIN_OPS), "calls": {"native": 4}}
