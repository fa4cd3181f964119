"""The KV-cache bookkeeping must not need torch: a scheduler process can use it without a device stack."""

from __future__ import annotations

import ast
import subprocess
import sys

from tests.conftest import REPO_ROOT

KV_CACHE_DIR = REPO_ROOT / "ascend_backend" / "kv_cache"


def test_no_kv_cache_module_imports_torch():
    offenders = []
    for path in sorted(KV_CACHE_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            else:
                continue
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in {"torch", "torch_npu", "numpy"}]
    assert offenders == []


# Loads ascend_backend.kv_cache with torch made unimportable, through the real package (whose
# __init__ imports no torch: its attributes and the op registry load lazily).
_PROBE = """
import sys
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "torch_npu"):
            raise ImportError("kv_cache imported " + name)
sys.meta_path.insert(0, NoTorch())
from ascend_backend.kv_cache import KVCacheManager, plan_kv_cache
manager = KVCacheManager(num_blocks=8, block_size=4)
allocation = manager.allocate("r", list(range(9)))
print(allocation.block_table, allocation.slot_mapping[:2])
"""


def test_kv_cache_runs_with_torch_unimportable():
    out = subprocess.run(
        [sys.executable, "-c", _PROBE],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "(1, 2, 3) [4, 5]"
