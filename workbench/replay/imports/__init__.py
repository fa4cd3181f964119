"""Traces users already have, turned into the workbench's trace format (`workbench.serving.load.trace`).

`lengths`: timed length-only traces — Mooncake / AISBench (`mooncake`), GuideLLM's `trace_synthetic` columns
(`guidellm`) and GuideLLM's WEKA conversations (`weka`); prompts of the recorded lengths are built by
`blocks`, sharing a prefix wherever hash ids repeat. `vllm_log`: a vLLM server's request log lines.
"""
