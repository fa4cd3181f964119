"""Names followed through imports and aliases; device strings resolved by local constant propagation;
values built at run time reported as unresolved, never dropped."""

from __future__ import annotations

from workbench.scan.python_rules import python_hits

NPU = frozenset({"synchronize", "set_device", "empty_cache"})


def found(source: str) -> list[tuple[int, str, str]]:
    return [(h.line, h.rule, h.detail) for h in python_hits("m.py", source, NPU)]


def rules_at(source: str) -> set[tuple[int, str]]:
    return {(line, rule) for line, rule, _ in found(source)}


def test_import_torch_cuda_as_alias():
    assert rules_at("import torch.cuda as tc\ntc.synchronize()\n") == {(2, "torch_cuda.api")}


def test_from_torch_import_cuda():
    assert rules_at("from torch import cuda\ncuda.synchronize()\ncuda.nvtx.mark('x')\n") == {
        (2, "torch_cuda.api"),
        (3, "torch_cuda.nvtx"),
    }


def test_from_torch_cuda_import_amp_and_functions():
    source = "from torch.cuda import amp\nfrom torch.cuda import get_device_capability as cap\nwith amp.autocast():\n    cap()\n"
    assert rules_at(source) == {(3, "amp.cuda"), (4, "torch_cuda.capability")}


def test_assignment_alias_is_followed():
    source = "import torch\ncu = torch.cuda\ncu.synchronize()\ncu.jiterator\n"
    assert (3, "torch_cuda.api") in rules_at(source)
    assert (4, "torch_cuda.unmapped") in rules_at(source)


def test_an_unrelated_cuda_name_is_not_torch():
    # a local object called `cuda` that is not an import alias of torch.cuda
    assert rules_at("class Config:\n    cuda = False\ncfg = Config()\nprint(cfg.cuda)\n") == set()


def test_imports_are_reported_where_imported_and_torch_names_where_used():
    source = "import torch\nfrom flash_attn import flash_attn_func\nflash_attn_func(q, k, v)\n"
    assert rules_at(source) == {(2, "lib.flash_attn")}


def test_optional_and_type_checking_imports_say_so():
    source = (
        "from typing import TYPE_CHECKING\ntry:\n    import xformers\nexcept ImportError:\n    xformers = None\n"
        "if TYPE_CHECKING:\n    import flashinfer\n"
    )
    details = {rule: detail for _, rule, detail in found(source)}
    assert details == {"lib.xformers": "optional import (try/except)", "lib.flashinfer": "TYPE_CHECKING only"}


def test_device_constant_assembled_from_pieces_resolves_at_the_call():
    source = "BASE = 'cu' + 'da'\ndef f(x):\n    return x.to(BASE + ':0')\n"
    [(line, rule, detail)] = found(source)
    assert (line, rule) == (3, "device.cuda_string")
    assert "'cuda:0'" in detail and "BASE (line 1)" in detail


def test_parameter_default_literal_is_reported_where_written():
    assert rules_at("def f(x, device='cuda:1'):\n    return x.to(device)\n") == {(1, "device.cuda_string")}


def test_opaque_parameter_is_not_a_finding():
    assert rules_at("def f(x, device):\n    return x.to(device)\n") == set()


def test_fstring_with_unknown_kind_is_unresolved_at_the_call():
    source = "import torch\ndef f(x, kind, i):\n    name = f'{kind}:{i}'\n    return x.to(name)\n"
    [(line, rule, detail)] = found(source)
    assert (line, rule) == (4, "unresolved.device")
    assert "name (line 3)" in detail


def test_environment_value_is_unresolved_unless_its_default_is_cuda():
    source = (
        "import os, torch\nd1 = torch.device(os.environ['DEVICE'])\nd2 = torch.device(os.getenv('DEVICE', 'cuda'))\n"
    )
    assert rules_at(source) == {(2, "unresolved.device"), (3, "device.cuda_string")}


def test_known_non_cuda_prefix_is_not_unresolved():
    assert rules_at("import torch\ndef f(i):\n    return torch.device('npu:%d' % i)\n") == set()


def test_fstring_starting_with_cuda_is_a_cuda_device():
    assert rules_at("def f(x, rank):\n    return x.to(f'cuda:{rank}')\n") == {(2, "device.cuda_string")}


def test_augmented_assignment_is_followed():
    source = "def f(x, i):\n    dev = 'cu'\n    dev += 'da'\n    return x.to(dev)\n"
    assert (4, "device.cuda_string") in rules_at(source)


def test_backend_built_at_run_time_is_unresolved_and_hccl_is_not():
    source = (
        "import torch.distributed as dist\nname = 'nc' + 'cl'\ndist.init_process_group(backend=name)\n"
        "def g(kind):\n    dist.new_group(backend=kind + '_pg')\n"
    )
    assert rules_at(source) == {(3, "nccl.backend"), (5, "unresolved.backend")}


def test_dynamic_import_of_a_literal_cuda_module_is_that_library():
    source = (
        "import importlib\nm = importlib.import_module('xformers.ops')\nn = importlib.util.find_spec('flash_attn')\n"
    )
    assert rules_at(source) == {(2, "lib.xformers"), (3, "lib.flash_attn")}


def test_docstrings_and_dict_keys_are_not_devices():
    source = '"""Runs on cuda."""\nTABLE = {"cuda": 1, "npu": 2}\ndef f():\n    "cuda"\n'
    assert rules_at(source) == set()


def test_compared_literal_is_one_compare_finding_not_a_device():
    assert rules_at("def f(d):\n    return d in ('cuda', 'cpu')\n") == {(2, "device.string_compare")}


def test_tensor_is_cuda_property_is_reported_but_a_platform_is_cuda_call_is_not():
    source = "def f(x, platform):\n    a = x.is_cuda\n    b = platform.is_cuda()\n"
    assert rules_at(source) == {(2, "tensor.cuda_method")}
