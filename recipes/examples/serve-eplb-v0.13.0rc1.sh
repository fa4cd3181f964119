#!/bin/bash
# A serving command as an Ascend user posted it (vllm-project/vllm-ascend issue #5798, vllm-ascend v0.13.0rc1),
# kept as an example for `ascend-workbench lint` and notebook 02: dynamic expert load balancing with the
# EPLB keys at the top level of --additional-config.
#
#   ascend-workbench lint recipes/examples/serve-eplb-v0.13.0rc1.sh --release v0.13.0rc1
#       -> DYNAMIC_EPLB is required_missing (the model runner refuses dynamic_eplb without it)
#   ascend-workbench lint recipes/examples/serve-eplb-v0.13.0rc1.sh --release v0.13.0rc1 --to v0.15.0rc1
#       -> the upgrade the maintainers advised: the three keys are only read inside eplb_config there,
#          so the same command silently runs without EPLB; --fix writes the migrated command
vllm serve /tmp/qwen3-vl-30B   --enable-expert-parallel     --additional-config '{
    "dynamic_eplb": true,
    "num_iterations_eplb_update": 200,
    "num_wait_worker_iterations": 20
  }'
