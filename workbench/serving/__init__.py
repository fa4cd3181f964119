"""Serving: one lifecycle for every vLLM OpenAI server the workbench starts or attaches to.

- `server`: recipe -> command line -> a started, health-checked `Server` (a context manager) whose
  whole process group is stopped on every path, with an orphan guard (`reaper`) for the paths Python
  never sees (SIGKILL, OOM kill, a killed notebook kernel);
- `crash`: why a server died or never became usable, and the fix;
- `client`: the small HTTP client for `/health`, `/v1/models`, `/version` (one way to ask);
- `smoke`: the first request, three ways; `load`: streaming load with `vllm bench serve`'s metrics.
"""
