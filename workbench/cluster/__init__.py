"""Past one machine: node bundles, the cluster check across nodes, and the layout planner (docs/METHOD.md §20).

bundle      NodeBundle: what one node runs (stack, npu-smi, hccn_tool, /etc/hccn.conf, env, command, ports)
collect     gather a bundle on this node, from copied files, or over a Ray cluster (one task per node)
hccn        the parsers of hccn_tool's outputs and /etc/hccn.conf
node        a bundle read as settings: data-parallel flags, connector, ports, instance
rules       policy/cluster/rules.yaml, validated
check       every rule over the bundles (checks_stack, checks_serving, checks_network), findings cited
planner     memory per rank of a layout before any start, and what fits
api         the typed use cases the verbs (collect, check --cluster, plan) and notebook 13 call
"""
