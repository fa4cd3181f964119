"""Token-wise ops and rotary embeddings on a real Ascend NPU: the kernel ran, matches native, inputs unchanged.

Each (release family, dtype) runs in a fresh process (tests/npu/worker.py) because `_npu_rotary_embedding`
keeps the first cos/sin cache of a process (op-plugin RopeAtb.cpp): results cannot depend on test order.
The rotary run deliberately hands several caches to one process (two head sizes, a second base, a
partial rotary): the first goes to `_npu_rotary_embedding` where the release uses it, every other one to
`npu_mrope`, and all must match native.
"""

from __future__ import annotations

import pytest

from tests.npu.runs import torch_npu_has, worker

pytestmark = pytest.mark.npu

TOL = {"float16": 5e-3, "bfloat16": 4e-2}
TOKEN_FAMILIES = {"v0.18.0": "release=0.18.0,chip=A2"}
ROTARY_FAMILIES = {
    "atb_rope": "release=0.18.0,chip=A2",  # rope.atb_v015
    "apply_rotary_pos_emb": "release=0.11.0,chip=A2",  # rope.apply_128 for neox 128/128
    "mrope_rope": "release=0.26.0,chip=A2",  # rope.mrope_main (newer than every tag read)
}


def check(r: dict, dtype: str) -> None:
    label = f"{r['op']} {r['facts']}"
    assert r["counts"] == {"npu": 1}, f"{label}: the NPU kernel did not run: {r['counts']}"
    assert sum(r["torch_npu_calls"].values()) == 1, f"{label}: called {r['torch_npu_calls']}"
    assert r["max_abs_err"] <= TOL[dtype] * (4 if r["op"] in ("rms_norm", "add_rms_norm") else 1), label
    assert r["unchanged"], f"{label}: an input tensor was modified"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_norms_and_activations_run_their_kernels(dtype):
    for r in worker(TOKEN_FAMILIES["v0.18.0"], dtype, "tokens"):
        check(r, dtype)
        assert r["torch_npu_calls"] == {r["table_kernel"]: 1}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("family", list(ROTARY_FAMILIES))
def test_rotary_families_match_native_whatever_ran_first(family, dtype):
    if not torch_npu_has("npu_mrope"):
        pytest.skip("the installed torch_npu has no npu_mrope (the kernel that takes a cache per call)")
    runs = worker(ROTARY_FAMILIES[family], dtype, "rotary")
    for r in runs:
        check(r, dtype)
    rope = [r for r in runs if r["op"] == "rotary_embedding"]
    called = [next(iter(r["torch_npu_calls"])) for r in rope]
    if family == "atb_rope":
        # One cache reaches the ATB kernel (the process's first); every other cache goes to npu_mrope.
        assert called[0] == "_npu_rotary_embedding" and set(called[1:]) == {"npu_mrope"}, called
    if family == "apply_rotary_pos_emb":
        head128 = next(r for r in rope if r["facts"] == {"head_size": 128, "rotary_dim": 128})
        assert head128["torch_npu_calls"] == {"npu_apply_rotary_pos_emb": 1}
    if family == "mrope_rope":
        assert set(called) == {"npu_mrope"}
