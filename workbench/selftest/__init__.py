"""The first hardware run as one command: every NPU kernel recipe against float32, and one served request.

plan     which recipes the release and chip select (and the other chips', through the override)
cases    the inputs each recipe runs on (the op suite's builders, shaped by the row's conditions)
run      one recipe on the device vs the native float32 reference (the op suite's metrics), timed
serve    one request through a vLLM server with the plugin
report   the one JSON document (kind "selftest") a user attaches to a bug
api      `SelftestRequest` -> `run_selftest` -> `SelftestReport`: what the verb and a notebook call
"""
