"""Lint a serving command, script or recipe against the vllm-ascend release it runs on (`workbench.lint.api`)."""
