"""The layers of `ascend_backend/` (docs/ARCHITECTURE.md), enforced from the code's own imports.

Every import counts (tests/import_graph.py: lazy ones, TYPE_CHECKING, `importlib.import_module("...")`).
Four rules:

1. every package and root module of `ascend_backend/` has a layer in LAYERS;
2. nothing imports a higher layer — the platform probe and kernel table sit below the op registry, the
   NPU adapters above the native ops they adapt;
3. no import cycle, between modules or between packages;
4. the registry loads its built-in ops by name (`BUILTIN_OP_MODULES`, like a plugin list): the one place a
   lower layer names a higher one, and it may name only the native ops and the adapters.
"""

from __future__ import annotations

from tests.conftest import REPO_ROOT
from tests.import_graph import cycles, import_graph, unit_graph

PACKAGE = REPO_ROOT / "ascend_backend"

# Bottom up. A unit is a package of ascend_backend/ or a root module; it may import its own layer and below.
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("foundation", frozenset({"envs", "faults", "signatures", "dump_format"})),
    ("platform", frozenset({"platform"})),  # kinds, the device probe, the kernel-selection table and limits
    ("registry", frozenset({"registry"})),
    ("native ops", frozenset({"ops", "attention", "quantization", "kv_cache"})),
    ("adapters", frozenset({"npu"})),  # the guard and the torch_npu adapters of the native ops
    ("engine", frozenset({"models", "vllm_plugin"})),
)
LAYER_OF = {unit: rank for rank, (_, units) in enumerate(LAYERS) for unit in units}


def unit_of(module: str) -> str:
    """'ascend_backend.platform.kernels.table' -> 'platform'; 'ascend_backend.envs' -> 'envs'."""
    return module.split(".")[1] if module.count(".") >= 1 else ""


def upward(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        for target in targets
        if LAYER_OF.get(unit_of(target), -1) > LAYER_OF.get(unit_of(module), len(LAYERS))
    )


def test_every_package_and_root_module_has_a_layer():
    units = {unit_of(m) for m in import_graph(PACKAGE, REPO_ROOT)} - {""}
    assert sorted(units - LAYER_OF.keys()) == [], "place the new package in LAYERS (and docs/ARCHITECTURE.md)"


def test_nothing_imports_a_higher_layer():
    assert upward(import_graph(PACKAGE, REPO_ROOT)) == []


def test_no_import_cycle_between_modules():
    assert cycles(import_graph(PACKAGE, REPO_ROOT)) == []


def test_no_import_cycle_between_packages():
    assert cycles(unit_graph(import_graph(PACKAGE, REPO_ROOT), unit_of)) == []


def test_the_registry_names_only_op_modules_it_loads():
    from ascend_backend.registry import BUILTIN_OP_MODULES

    layers = {dict(LAYERS)[name] for name in ("native ops", "adapters")}
    assert all(any(unit_of(m) in units for units in layers) for m in BUILTIN_OP_MODULES), BUILTIN_OP_MODULES


def test_the_checker_sees_a_cycle_and_an_upward_import():
    """The rules above must be able to fail: a planted cycle and a planted upward edge are found."""
    graph = {
        "ascend_backend.platform.device": {"ascend_backend.registry"},
        "ascend_backend.registry": {"ascend_backend.platform.device"},
    }
    assert cycles(graph) == [["ascend_backend.platform.device", "ascend_backend.registry"]]
    assert cycles(unit_graph(graph, unit_of)) == [["platform", "registry"]]
    assert upward(graph) == ["ascend_backend.platform.device -> ascend_backend.registry"]


def test_the_checker_counts_a_lazy_import(tmp_path):
    """A lazy import inside a function, and importlib.import_module with a literal, are edges too."""
    package = tmp_path / "pkg"
    (package / "low").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "low" / "__init__.py").write_text("")
    (package / "low" / "a.py").write_text("def f():\n    from pkg.high import b\n")
    (package / "high.py").write_text("import importlib\nimportlib.import_module('pkg.low.a')\n")
    graph = import_graph(package, tmp_path)
    assert graph["pkg.low.a"] == {"pkg.high"} and graph["pkg.high"] == {"pkg.low.a"}
    assert cycles(graph) == [["pkg.high", "pkg.low.a"]]


def test_the_architecture_page_names_every_layer_and_unit():
    page = (REPO_ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = page.split("## `ascend_backend/`", 1)[1].split("\n## ", 1)[0]
    missing = [unit for _, units in LAYERS for unit in sorted(units) if f"`{unit}" not in section]
    assert missing == [], "describe the package in docs/ARCHITECTURE.md's ascend_backend section"
