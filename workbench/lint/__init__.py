"""Lint what will be served against the vllm-ascend release it runs on (`workbench.lint.api`): a serving
command, script or recipe (the config-truth table), and a quantized checkpoint (`checkpoint.lint_checkpoint`,
from the cited capability table workbench/truth/data/quant_capabilities.json)."""
