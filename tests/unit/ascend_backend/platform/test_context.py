"""Selection context: the release from vllm-ascend or torch_npu/CANN, the chip from the device name, the override."""

from __future__ import annotations

import pytest
from packaging.version import Version

from ascend_backend import envs
from ascend_backend.platform import kernels
from ascend_backend.platform.kernels import ChipFamily, GraphMode, StackFacts, chip_family
from ascend_backend.platform.kernels.context import apply_override, build_context, facts_from_stack
from ascend_backend.platform.kernels.recipes import RECIPES
from ascend_backend.registry import REGISTRY


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("Ascend910B4", ChipFamily.A2),
        ("910B2C", ChipFamily.A2),
        ("Ascend910_9392", ChipFamily.A3),
        ("910_9382", ChipFamily.A3),
        ("Ascend910", ChipFamily.A3),
        ("Ascend310P3", ChipFamily.P310),
        ("Ascend950PR", ChipFamily.A5),
        ("A3", ChipFamily.A3),
        ("310p", ChipFamily.P310),
        ("Ascend310B4", None),
        ("NVIDIA H100", None),
        ("", None),
        (None, None),
    ],
)
def test_chip_family_from_device_names(name, family):
    assert chip_family(name) is family


def test_installed_vllm_ascend_is_the_release():
    context = build_context(StackFacts(vllm_ascend="0.13.0", torch_npu="2.5.1"))
    assert context.release == Version("0.13.0") and "installed" in context.release_basis


def test_an_unread_release_uses_the_newest_older_one_and_says_so():
    context = build_context(StackFacts(vllm_ascend="0.8.6"))
    assert context.release == Version("0.8.5rc1") and "not a release the table read" in context.release_basis


def test_a_release_newer_than_every_tag_read_uses_the_main_rows():
    context = build_context(StackFacts(vllm_ascend="0.26.0"))
    assert context.release == Version("0.26.0") and "main" in context.release_basis
    assert kernels.select("rotary_embedding", context).kernel == "npu_mrope"


def test_a_release_older_than_the_table_has_none():
    context = build_context(StackFacts(vllm_ascend="0.6.0"))
    assert context.release is None and "older than v0.7.3" in context.release_basis


def test_torch_npu_and_cann_pick_the_matrix_row():
    context = build_context(StackFacts(torch_npu="2.8.0.post2", cann="8.5.1"))
    assert context.release == Version("0.13.0rc3") and context.candidates == (Version("0.13.0rc3"),)


def test_torch_npu_alone_may_match_several_rows_it_is_ambiguous_and_all_are_named():
    context = build_context(StackFacts(torch_npu="2.7.1.dev20250724"))
    assert context.release is None and context.ambiguous
    assert set(context.candidates) == {Version(v) for v in ("0.10.0rc1", "0.10.1rc1", "0.10.2rc1", "0.11.0rc0")}
    assert "v0.10.0rc1" in context.release_basis and "ambiguous" in context.release_basis
    assert "release=" in context.release_basis  # how to pin one


def test_an_ambiguous_release_runs_only_what_every_candidate_agrees_on():
    # torch_npu 2.10.0.post2 + CANN 9.0.1 fit v0.23.0rc1, v0.24.0rc1 and v0.25.1rc1, whose cache writes differ
    # (device_op.py@v0.25.1rc1:50 npu_scatter_pa_kv_cache vs _npu_reshape_and_cache before).
    context = build_context(StackFacts(torch_npu="2.10.0.post2", cann="9.0.1"))
    assert context.ambiguous and "ambiguous" in context.release_label
    write = kernels.select("reshape_and_cache", context)
    assert write.native and "v0.25.1rc1: npu_scatter_pa_kv_cache" in write.reason and "release=" in write.reason
    assert kernels.select("rms_norm", context).kernel == "npu_rms_norm"  # the same in all three
    pinned = apply_override(context, (("release", "0.25.1rc1"),))
    assert kernels.select("reshape_and_cache", pinned).kernel == "npu_scatter_pa_kv_cache"


def test_local_build_labels_match_the_matrix_row():
    assert build_context(StackFacts(torch_npu="2.9.0.post1+git4c901a4")).release == Version("0.18.0")


def test_nothing_installed_means_no_release():
    context = build_context(StackFacts())
    assert context.release is None and context.chip is ChipFamily.A2 and "assumed" in context.chip_basis


def test_facts_from_a_stack_fingerprint():
    stack = {
        "python": "3.11.7",
        "versions": {"torch": "2.7.1", "torch-npu": "2.7.1.post1", "vllm-ascend": "0.11.0"},
        "cann": {"toolkit": "8.3.RC2", "kernels": "8.3.RC2", "nnal_atb": None},
        "chip": "910B4",
        "card_count": 8,
    }
    assert facts_from_stack(stack) == StackFacts("0.11.0", "2.7.1.post1", "8.3.RC2", "910B4")
    assert facts_from_stack({"versions": {"torch_npu": "2.5.1"}, "chip": None}) == StackFacts(torch_npu="2.5.1")
    assert facts_from_stack({}) == StackFacts()


def test_override_sets_release_chip_graph_and_pins():
    base = build_context(StackFacts())
    items = envs._BY_NAME["ASCEND_BACKEND_KERNELS"].parse(
        "release=v0.18.0, chip=Ascend910_9392, graph=full_decode_only, pa_shape=1, rms_norm=npu_rms_norm"
    )
    context = apply_override(base, items)
    assert context.release == Version("0.18.0") and context.chip is ChipFamily.A3
    assert context.graph_mode is GraphMode.FULL_DECODE_ONLY and context.pa_shape
    assert context.pins == (("rms_norm", "npu_rms_norm"),)
    assert kernels.select("paged_decode_attention", context).kernel == "_npu_paged_attention"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("release", "not key=value"),
        ("release=banana", "not a version"),
        ("chip=H100", "not a chip family"),
        ("graph=SOMETIMES", "graph='SOMETIMES'"),
        ("colour=red", "unknown key 'colour'"),
        ("paged_decode_attention=flash", "has no recipe 'flash'"),
    ],
)
def test_bad_override_names_the_variable_and_the_fix(raw, message):
    with pytest.raises(ValueError, match="ASCEND_BACKEND_KERNELS|recipe") as info:
        apply_override(build_context(StackFacts()), envs._BY_NAME["ASCEND_BACKEND_KERNELS"].parse(raw))
    assert message in str(info.value)


def test_active_context_follows_the_environment_variable(monkeypatch):
    monkeypatch.setenv("ASCEND_BACKEND_KERNELS", "release=0.11.0,chip=A2")
    assert kernels.active_context().release == Version("0.11.0")
    assert kernels.choose("paged_decode_attention").row.id == "decode.pa"
    monkeypatch.setenv("ASCEND_BACKEND_KERNELS", "release=0.18.0,chip=A2")
    assert kernels.choose("paged_decode_attention").row.id == "decode.fia"


def test_describe_shows_the_kernel_and_the_row_that_chose_it(monkeypatch):
    monkeypatch.setenv("ASCEND_BACKEND_KERNELS", "release=0.11.0,chip=A2")
    table = REGISTRY.describe("cpu").set_index("op")
    assert table.loc["paged_decode_attention", "npu_kernel"] == "_npu_paged_attention"
    assert table.loc["paged_decode_attention", "kernel_row"].startswith(
        "decode.pa: vllm_ascend/attention/attention_v1.py@"
    )
    assert table.loc["linear", "npu_kernel"] == "-"  # no table row: aten matmul everywhere
    assert set(RECIPES) <= set(table.index)
