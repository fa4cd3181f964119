"""W8A8 quantization of a float checkpoint, behind `ascend-workbench quantize` and notebook 10.

    request   QuantizeRequest / Scheme (w8a8-static, w8a8-dynamic) / QuantizeResult
    calibrate calibration texts from workbench.evaluate's data sets, observed ranges per layer (tqdm)
    checkpoint  resolve -> plan -> calibrate -> quantize -> write msmodelslim or compressed-tensors,
              atomically, with quantization.json (per-layer scheme and ranges, provenance)

The arithmetic and the formats are `ascend_backend.quantization`'s; this package only drives them.
"""
