"""Failures without an Ascend code that the second round of the public record taught triage (development half
only): each log is a thread's own lines, with the family, cause and fix the knowledge base gives it."""

from __future__ import annotations

from tests.unit.workbench.triage.first_error import first_diagnosis, first_kind
from workbench.triage.kinds import FailureKind

# vllm-project/vllm-ascend#7401: Mooncake's ascend_direct transport cannot reach the decode node
KV_TRANSFER = """\
E20260608 14:45:44.404089 342420 ascend_direct_transport.cpp:1107] Connect timeout to: 10.2:20033, you can increase the timeout duration to reduce the ASCEND_CONNECT_TIMEOUT environment variable.
E20260608 14:45:44.404292 342420 ascend_direct_transport.cpp:836] Transfer slice failed with status: 103902
(Worker_DP0_EP0 pid=335952) ERROR 06-08 14:45:44 [mooncake_hybrid_connector.py:551] Mooncake transfer failed for request chatcmpl-270f82b6
"""

# vllm-project/vllm-ascend#516 (the maintainers' note on it: #72, #122)
CUDA_PATH = """\
(NPURayWorkerWrapper pid=26491) ERROR 04-14 19:53:35 worker_base.py:581]     dist.all_reduce(input_, group=self.device_group)
AssertionError: Torch not compiled with CUDA enabled
"""


def test_a_kv_connector_that_cannot_reach_its_peer_is_kv_transfer():
    diagnosis = first_diagnosis(KV_TRANSFER)
    assert diagnosis.kind is FailureKind.KV_TRANSFER
    assert "use_ascend_direct" in diagnosis.fix


def test_a_cuda_only_vllm_path_on_the_npu_is_a_feature_the_release_does_not_serve():
    assert first_diagnosis(CUDA_PATH).kind is FailureKind.UNSUPPORTED_FEATURE


def test_an_engine_that_died_without_its_cause_in_the_log_stays_unknown():
    """vllm-project/vllm-ascend#3513: nothing in these lines says why; `unknown` with the lines read."""
    log = "(APIServer pid=3478) ERROR 10-16 16:27:53 [core_client.py:564] Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.\n"
    assert first_kind(log) in (None, FailureKind.UNKNOWN)


# vllm-project/vllm-ascend#9677 (third round): BiSheng crashed compiling a Triton-Ascend kernel on a 950PR
TRITON_KERNEL = """\
[test_rope] FAILED: MLIRCompilationError:
///------------------[ERROR][Triton][BEG]------------------
[ConvertLinalgRToBinary] encounters error:
bisheng: error: clang frontend command failed with exit code 139 (use -v to see invocation)
"""


def test_a_triton_kernel_the_bisheng_compiler_fails_on_is_a_compiler_failure():
    diagnosis = first_diagnosis(TRITON_KERNEL)
    assert diagnosis.kind is FailureKind.COMPILER_POOL
    assert "triton-ascend" in diagnosis.fix


def test_a_compiler_without_a_target_for_the_chip_still_says_the_chip_is_not_supported():
    """The chip line outranks the generic compile failure (chip_not_supported above triton_kernel_compile)."""
    log = "triton.compiler.errors.MLIRCompilationError: \nbishengir-compile: for the --target option: Cannot find option named 'Ascend310P1'!\n"
    assert first_diagnosis(log).kind is FailureKind.CANN_INIT


# vllm-project/vllm-ascend#8525 and #11622 (fifth round): a vLLM model layer that only subclasses vLLM's own
# attention backends (vllm/model_executor/models/whisper_causal.py) refuses the Ascend backend by name
BACKEND_REFUSED = """\
(EngineCore pid=110656) ERROR 04-21 19:11:01 [core.py:1099] EngineCore failed to start.
NotImplementedError: <class 'vllm_ascend.attention.attention_v1.AscendAttentionBackend'> is not yet supported.Contributions to support more backends are much appreciated.
"""


def test_a_model_that_refuses_the_ascend_attention_backend_is_a_feature_the_release_does_not_serve():
    assert first_diagnosis(BACKEND_REFUSED).kind is FailureKind.UNSUPPORTED_FEATURE


def test_a_not_implemented_error_without_a_backend_class_is_not_read_as_that_refusal():
    """Only a backend class named as not supported is this refusal; another NotImplementedError says nothing."""
    log = "NotImplementedError: <class 'torch.nn.Module'> is not yet supported\n"
    assert first_kind(log) is not FailureKind.UNSUPPORTED_FEATURE


# Ascend/pytorch#24 (sixth round): Python started inside torch_npu's source tree imports the checkout, which
# has no compiled `_C`; the maintainer's fix is to run from another directory
TORCH_NPU_SOURCE_TREE = """\
Traceback (most recent call last):
  File "/data/package/pytorch/torch_npu/__init__.py", line 14, in <module>
    import torch_npu.npu
  File "/data/package/pytorch/torch_npu/npu/utils.py", line 11, in <module>
    import torch_npu._C
ModuleNotFoundError: No module named 'torch_npu._C'
"""


def test_torch_npu_without_its_compiled_module_imported_from_a_source_tree_is_a_shadowing_checkout():
    diagnosis = first_diagnosis(TORCH_NPU_SOURCE_TREE)
    assert diagnosis.kind is FailureKind.PACKAGE_SHADOWED
    assert "directory" in diagnosis.fix


def test_an_installed_torch_npu_without_its_compiled_module_is_not_read_as_a_shadowing_checkout():
    """The same message from site-packages is a broken or mismatched install, not a checkout in the way."""
    log = TORCH_NPU_SOURCE_TREE.replace("/data/package/pytorch/", "/usr/local/lib/python3.10/site-packages/")
    assert first_diagnosis(log).kind is FailureKind.VERSION_MISMATCH


# vllm-project/vllm-ascend#564 (sixth round): CANN's graph engine and its operator compiler fail to start
GE_INIT = """\
ERROR 04-18 01:55:45 engine.py:400]        GELib::InnerInitialize failed.[FUNC:Initialize][FILE:gelib.cc][LINE:177]
ERROR 04-18 01:55:45 engine.py:400]        GEInitialize failed.[FUNC:GEInitialize][FILE:ge_api.cc][LINE:337]
ERROR 04-18 01:55:45 engine.py:400]        [Init][Compiler]Init compiler failed[FUNC:ReportInnerError][FILE:log_inner.cpp][LINE:145]
"""


def test_cann_graph_engine_that_cannot_initialise_is_cann_init():
    assert first_diagnosis(GE_INIT).kind is FailureKind.CANN_INIT


# vllm-project/vllm-ascend#8107 (sixth round): an aclnn operator's parameter check, quoted without the word
# "error" spelled right and without a code
ACLNN_PARAMETER_CHECK = (
    "v0.13.0 aclnnFusedInferAttentionScoreV3 erorr: \"the key/value's actual sequence lengths shape size is 9, "
    'it should be bigger or equal to batch size(16) or equal to 1"\n'
)


def test_an_aclnn_operator_that_says_what_its_input_should_be_refused_it_at_its_check():
    diagnosis = first_diagnosis(ACLNN_PARAMETER_CHECK)
    assert diagnosis.kind is FailureKind.OPERATOR_CHECK
    assert any("aclnnFusedInferAttentionScoreV3" in line for line in diagnosis.evidence)


# vllm-project/vllm-ascend#4197 (seventh round): vLLM main and vllm-ascend main in November 2025
PLUGIN_BACKEND = (
    "ValueError: Unknown attention backend: 'ASCEND'. Valid options are: FLASH_ATTN, TRITON_ATTN, XFORMERS, "
    "ROCM_ATTN, TORCH_SDPA, FLASHINFER, FLASHINFER_MLA, TRITON_MLA, CUTLASS_MLA, FLASHMLA, PALLAS, IPEX\n"
)


def test_an_ascend_attention_backend_vllm_does_not_know_is_a_plugin_built_for_another_vllm():
    diagnosis = first_diagnosis(PLUGIN_BACKEND)
    assert diagnosis.kind is FailureKind.VERSION_MISMATCH
    assert "CUSTOM" in " ".join(diagnosis.causes)
    # the MLA backend's name says the same (vllm_ascend/attention/mla_v1.py@v0.11.0:49)
    assert first_diagnosis(PLUGIN_BACKEND.replace("'ASCEND'", "'ASCEND_MLA'")).kind is FailureKind.VERSION_MISMATCH


def test_an_unknown_backend_name_that_is_not_the_plugins_is_not_read_as_a_mismatch():
    """A typo in VLLM_ATTENTION_BACKEND says nothing about the plugin's version."""
    assert first_kind(PLUGIN_BACKEND.replace("'ASCEND'", "'FLASH_ATN'")) is not FailureKind.VERSION_MISMATCH


# vllm-project/vllm-ascend#16983 (seventh round): argparse refuses a config flag's JSON value (title, as cut)
ARGUMENT_REFUSED = "vllm serve: error: argument --attention-config/-ac: 1 validation error for AttentionConfi\n"


def test_a_flag_value_the_argument_parser_refuses_is_a_refused_setting():
    assert first_diagnosis(ARGUMENT_REFUSED).kind is FailureKind.CONFIG_REFUSED
    typed = "vllm serve: error: argument --max-model-len: invalid int value: '32k'\n"
    assert first_diagnosis(typed).kind is FailureKind.CONFIG_REFUSED


# vllm-project/vllm-ascend#183 (seventh round): DeepSeek-V3's FP8 checkpoint on a release that does not serve it
QUANTIZED_WEIGHTS = """\
(RayWorkerWrapper pid=193386) worker_base.py:572]     param = params_dict[name] [repeated 30x across cluster]
(RayWorkerWrapper pid=193386) worker_base.py:572] KeyError: 'model.layers.27.mlp.experts.w2_weight_scale_inv' [repeated 30x across cluster]
[ERROR] 2025-02-26-20:38:15 (PID:211548, Device:0, RankID:-1) ERR99999 UNKNOWN applicaiton exception
"""


def test_a_checkpoints_quantization_parameter_the_model_has_no_slot_for_is_a_quantization_not_served():
    diagnosis = first_diagnosis(QUANTIZED_WEIGHTS)
    assert diagnosis.kind is FailureKind.UNSUPPORTED_FEATURE
    assert "--quantization ascend" in diagnosis.fix


def test_a_missing_ordinary_weight_is_not_read_as_a_quantization_not_served():
    log = QUANTIZED_WEIGHTS.replace("w2_weight_scale_inv", "w2_weight")
    assert first_kind(log) is not FailureKind.UNSUPPORTED_FEATURE


# vllm-project/vllm-ascend#10562 (seventh round): the LoRA expand kernel's input check (csrc/torch_binding.cpp)
CUSTOM_OP_CHECK = """\
(Worker_TP1 pid=6351) ERROR 06-16 08:18:08 [multiproc_executor.py:962] return self.fx_forward(*args, **kwargs)
RuntimeError: hidden in should be smaller than hidden out.
"""


def test_a_vllm_ascend_kernel_that_says_what_its_input_should_be_refused_it_at_its_check():
    assert first_diagnosis(CUSTOM_OP_CHECK).kind is FailureKind.OPERATOR_CHECK
    prose = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices\n"
    assert first_kind(prose) is not FailureKind.OPERATOR_CHECK
