"""Feature-by-feature enabling: find the feature that breaks a vLLM server, automatically.

plan      feature plans (recipes/features/*.yaml) and how features compose into a serving recipe
outputs   greedy outputs with logprobs, and the comparison that catches "runs but answers wrong"
runner    baseline -> alone -> cumulative -> pairs, resumable, each step saved as it finishes
report    tables and charts of a bisect
"""
