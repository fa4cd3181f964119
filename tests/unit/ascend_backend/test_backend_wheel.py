"""A production install is the backend only: the wheel's base dependencies, in a fresh venv with torch.

`import ascend_backend` in a vLLM deployment must not pull JupyterLab, papermill, plotly or aiohttp.
This builds the project's wheel, installs it with its base dependencies into a new virtualenv that has
the same torch wheel as this one, imports the backend, runs an op, loads the vLLM plugin's entry point,
and checks that no workbench dependency was installed or imported.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow

WORKBENCH_ONLY = ("jupyterlab", "papermill", "plotly", "aiohttp", "pandas", "pydantic", "httpx", "ipywidgets")
TORCH_WHEELS = Path("/opt/wheels")

PROBE = textwrap.dedent(
    """
    import json, sys
    from importlib import metadata
    import torch
    import ascend_backend
    from ascend_backend.registry import REGISTRY
    x = torch.randn(3, 64)
    weight = torch.ones(64)
    out = REGISTRY.dispatch("rms_norm", x.device, x, weight, 1e-6)
    expected = x / torch.sqrt((x.double() ** 2).mean(-1, keepdim=True) + 1e-6).float()
    (entry,) = [e for e in metadata.entry_points(group="vllm.general_plugins") if e.name == "ascend_backend"]
    register = entry.load()
    print(json.dumps({
        "max_err": float((out - expected).abs().max()),
        "entry_point": f"{register.__module__}.{register.__name__}",
        "modules": sorted(m.split(".")[0] for m in sys.modules),
        "distributions": sorted(d.metadata["Name"].lower() for d in metadata.distributions()),
    }))
    """
)


def _run(argv: list[str], **kwargs) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_backend_wheel_installs_and_runs_with_torch_alone(tmp_path):
    torch_version = _run([sys.executable, "-c", "import torch; print(torch.__version__)"]).strip()
    wheel_dir, source = tmp_path / "dist", tmp_path / "src"
    # Build from a copy of what the wheel is made of, so setuptools' build/ and egg-info stay out of the repo.
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for part in ("ascend_backend", "workbench"):
        shutil.copytree(REPO_ROOT / part, source / part, ignore=ignore)
    for part in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / part, source / part)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheel_dir), str(source)])
    (wheel,) = wheel_dir.glob("ascend_porting_workbench-*.whl")

    venv = tmp_path / "prod"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = str(venv / "bin" / "python")
    # The same torch as this environment (the local CPU wheel where there is one), then the backend.
    torch_spec = f"torch=={torch_version.split('+')[0]}"
    find_links = ["--find-links", str(TORCH_WHEELS)] if TORCH_WHEELS.is_dir() else []
    _run([python, "-m", "pip", "install", "--quiet", "--no-compile", *find_links, torch_spec])
    _run([python, "-m", "pip", "install", "--quiet", "--no-compile", *find_links, str(wheel)])

    report = json.loads(_run([python, "-c", PROBE], cwd=tmp_path))
    assert report["max_err"] < 1e-5
    assert report["entry_point"] == "ascend_backend.vllm_plugin.register"
    installed = [name for name in WORKBENCH_ONLY if name in report["distributions"]]
    imported = [name for name in WORKBENCH_ONLY if name in report["modules"]]
    assert installed == [] and imported == [], f"installed: {installed}, imported: {imported}"
