"""The one way to ask a vLLM OpenAI server about itself: /health, /v1/models, /version.

Smoke checks, the launcher, the load generator and the sweep all need the same three answers; they ask
through these functions so a change in the API (or a clearer error) lands in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import httpx

from workbench.errors import WorkbenchError


@dataclass(frozen=True)
class ModelEntry:
    """One entry of /v1/models: the id requests must use, and where the server loaded it from."""

    id: str
    root: str | None  # a local directory for local models, else a hub id or None

    @property
    def local_dir(self) -> Path | None:
        return Path(self.root) if self.root and Path(self.root).is_dir() else None


def healthy(url: str, *, client: httpx.Client | None = None, timeout_s: float = 2.0) -> bool:
    """True when GET /health answers 200 (the HTTP front end is up; not proof that it serves)."""
    try:
        if client is not None:
            return client.get(f"{url}/health", timeout=timeout_s).status_code == 200
        return httpx.get(f"{url}/health", timeout=timeout_s).status_code == 200
    except httpx.HTTPError:
        return False


def list_models(url: str, *, client: httpx.Client | None = None, timeout_s: float = 10.0) -> list[ModelEntry]:
    """The models the server lists; raises httpx errors (callers decide how a failure reads)."""
    response = (client or httpx).get(f"{url}/v1/models", timeout=timeout_s)
    response.raise_for_status()
    return [ModelEntry(str(m["id"]), m.get("root")) for m in response.json().get("data") or []]


def served_model(url: str, *, client: httpx.Client | None = None) -> str:
    """The first model id the server lists; a clear error when it lists none."""
    models = list_models(url, client=client)
    if not models:
        raise WorkbenchError(f"{url}/v1/models lists no model; is this a vLLM OpenAI server?")
    return models[0].id


def model_dir(url: str, model: str) -> Path | None:
    """The served model's local directory (from /v1/models `root`), None when it is not on this machine."""
    return next((m.local_dir for m in list_models(url) if m.id == model), None)


def server_version(url: str) -> str | None:
    """The vLLM version the server reports at /version (None when it does not answer)."""
    try:
        return httpx.get(f"{url.rstrip('/')}/version", timeout=5.0).json().get("version")
    except (httpx.HTTPError, ValueError):
        return None
