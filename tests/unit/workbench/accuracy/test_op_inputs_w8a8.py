"""The op suite's static W8A8 inputs carry a nonzero zero point (commit fe1c948).

The NPU static kernel takes msmodelslim's `input_offset`; a suite that only ever hands it 0 (the
quantizer's symmetric default since fe9facf) cannot catch an adapter that drops or mis-signs it.
"""

from __future__ import annotations

import torch

from ascend_backend.quantization.arithmetic import quantize_static
from workbench.accuracy.op_inputs import make_inputs
from workbench.accuracy.opsuite import load_cases


def test_every_static_w8a8_case_exercises_a_nonzero_input_offset():
    cases = load_cases(ops=["w8a8_linear"])
    assert cases, "the core op recipe lists w8a8_linear cases"
    for case in cases:
        x, _, input_scale, input_offset, _, _ = make_inputs("w8a8_linear", dict(case.params), case.seed).args
        assert input_offset.dtype == torch.int8 and int(input_offset) != 0, case
        # and the offset is the one that uses all 256 levels over x's range: x's extremes land at the ends
        q = quantize_static(x, 1 / input_scale.float(), input_offset.float())
        assert int(q.min()) <= -127 and int(q.max()) >= 126, case
