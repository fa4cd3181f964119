"""torch's autoload of a torch_npu that cannot load, for real: the probe and `check` diagnose, nothing dies.

Each case builds an installed-looking torch_npu in a temp dir (a package and a `*.dist-info` whose
entry_points.txt registers it under `torch.backends`, as the real wheel does) whose import asks the system's
dynamic loader for a library that is not there (`ctypes.CDLL`), so the error is the loader's own message,
raised as the ImportError torch_npu's extension import raises. torch's autoload then fails inside
`import torch` exactly as on a machine without CANN; the tests run real processes with that package on the
path, never stored error text.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow  # fresh interpreters, each importing torch

STAND_IN = '''"""Stand-in torch_npu: its import fails where the loader cannot find {lib} (what torch_npu._C needs)."""
import ctypes

try:
    ctypes.CDLL("{lib}")
except OSError as exc:
    raise ImportError(str(exc)) from None


def _autoload():
    pass
'''


def install_stand_in(root: Path, missing_library: str) -> Path:
    package, info = root / "torch_npu", root / "torch_npu-2.7.1.dist-info"
    package.mkdir(parents=True)
    info.mkdir()
    (package / "__init__.py").write_text(STAND_IN.format(lib=missing_library))
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch-npu\nVersion: 2.7.1\n")
    (info / "entry_points.txt").write_text("[torch.backends]\ntorch_npu = torch_npu:_autoload\n")
    (info / "top_level.txt").write_text("torch_npu\n")
    (info / "RECORD").write_text("torch_npu/__init__.py,,\ntorch_npu-2.7.1.dist-info/METADATA,,\n")
    return root


def run(code: str, site: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASCEND_", "TORCH_DEVICE", "LD_LIBRARY"))}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(REPO_ROOT)])
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=timeout
    )


PROBE = """
import ascend_backend
status = ascend_backend.device.npu_status()
import torch
print(status.kind.name)
print(status.detail)
print(status.fix)
print(torch.ones(3).sum().item(), ascend_backend.device.detect().kind.name)
"""


@pytest.fixture(
    scope="module",
    params=[
        ("libascendcl.so", "CANN_NOT_SOURCED", "set_env.sh"),
        ("libascend_hal.so", "DRIVER_MISSING", "mount the Ascend driver"),
    ],
)
def broken(request, tmp_path_factory):
    library, kind, fix = request.param
    return install_stand_in(tmp_path_factory.mktemp(kind.lower()), library), library, kind, fix


def test_the_stand_in_breaks_import_torch_as_torch_npu_does(tmp_path):
    # The control: without the guard, torch's autoload dies inside `import torch`.
    site, library = install_stand_in(tmp_path, "libascendcl.so"), "libascendcl.so"
    out = run("import torch", site)
    assert out.returncode != 0
    assert "Failed to load the backend extension: torch_npu" in out.stderr and library in out.stderr


def test_import_ascend_backend_and_the_probe_diagnose_and_torch_still_works(broken):
    site, library, kind, fix = broken
    out = run(PROBE, site)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == kind and library in lines[1] and fix in lines[2]
    assert lines[3] == "3.0 CPU"  # torch imported and usable, the device is the CPU
    assert "Traceback" not in out.stderr


def test_the_workbench_check_reports_the_cause(tmp_path):
    site, library, fix = install_stand_in(tmp_path / "site", "libascendcl.so"), "libascendcl.so", "set_env.sh"
    report = tmp_path / "check.json"
    out = run(f"from workbench.cli import main\nraise SystemExit(main(['check', '--json', {str(report)!r}]))", site)
    assert "Traceback" not in out.stderr, out.stderr
    line = next(r for r in json.loads(report.read_text())["results"] if r["name"] == "versions.torch_npu")
    assert library in line["observed"] and fix in line["fix"]
