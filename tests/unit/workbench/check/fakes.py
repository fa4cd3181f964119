"""Fakes for the pre-flight tests: fake Ascend install trees, a fake `npu-smi` on PATH printing
captured real outputs, and contexts that point the checks at them instead of the real machine."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO_ROOT
from workbench.check.context import CheckContext

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "check"


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class AscendTree:
    """A fake /usr/local/Ascend laid out like a real 8.x install (toolkit/latest -> 8.2.RC1)."""

    root: Path

    @property
    def toolkit(self) -> Path:
        return self.root / "ascend-toolkit" / "latest"

    @property
    def lib64(self) -> Path:
        return self.toolkit / "lib64"

    def sourced_env(self, **extra: str) -> dict[str, str]:
        """What `source set_env.sh` (toolkit and NNAL) leaves in the environment."""
        env = {
            "PATH": os.environ.get("PATH", ""),
            "ASCEND_HOME_PATH": str(self.toolkit),
            "ASCEND_TOOLKIT_HOME": str(self.toolkit),
            "LD_LIBRARY_PATH": f"{self.root}/driver/lib64:{self.lib64}",
            "ATB_HOME_PATH": str(self.root / "nnal" / "atb" / "latest" / "atb" / "cxx_abi_1"),
        }
        env.update(extra)
        return env


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def build_ascend_tree(
    root: Path,
    *,
    cann: str | None = "8.2.RC1",
    driver: str | None = "driver_25.0.rc1.1_version.info",
    firmware: str | None = "firmware_7.7.0.1.231_version.info",
    atb: str | None = "nnal_atb_8.2.RC1_version.info",
) -> AscendTree:
    """Lay out version files from the fixtures. `cann` '8.2.RC1' or '8.1.RC1' picks that release's files."""
    tree = AscendTree(root)
    if cann is not None:
        release = root / "ascend-toolkit" / cann
        if cann == "8.2.RC1":
            _write(
                release / "aarch64-linux" / "ascend_toolkit_install.info",
                fixture_text("cann_8.2.RC1_ascend_toolkit_install.info"),
            )
            _write(release / "toolkit" / "version.info", fixture_text("cann_8.2.RC1_toolkit_version.info"))
            _write(release / "opp_kernel" / "version.info", fixture_text("cann_8.2.RC1_opp_kernel_version.info"))
        else:
            _write(
                release / "aarch64-linux" / "ascend_toolkit_install.info",
                fixture_text("cann_8.1.RC1_ascend_toolkit_install.info"),
            )
            _write(release / "runtime" / "version.info", fixture_text("cann_8.1.RC1_runtime_version.info"))
            _write(release / "compiler" / "version.info", fixture_text("cann_8.1.RC1_compiler_version.info"))
            _write(release / "version.cfg", fixture_text("cann_8.1.RC1_latest_version.cfg"))
        _write(release / "lib64" / "libascendcl.so", "")
        _write(root / "ascend-toolkit" / "set_env.sh", "# fake\n")
        (root / "ascend-toolkit" / "latest").symlink_to(release)
    if driver is not None:
        _write(root / "driver" / "version.info", fixture_text(driver))
    if firmware is not None:
        _write(root / "firmware" / "version.info", fixture_text(firmware))
    if atb is not None:
        _write(root / "nnal" / "atb" / "latest" / "version.info", fixture_text(atb))
    return tree


def install_fake_npu_smi(bin_dir: Path, table: str | None, board: str | None = None, exit_code: int = 0) -> Path:
    """An executable `npu-smi` that prints captured outputs: `info` -> the table fixture (or an error
    fixture with `exit_code`), `info -t board -i N` -> the board text."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    data = bin_dir / "npu-smi-data"
    data.mkdir(exist_ok=True)
    (data / "info.txt").write_text(fixture_text(table) if table else "", encoding="utf-8")
    (data / "board.txt").write_text(board or "", encoding="utf-8")
    script = bin_dir / "npu-smi"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "info" ] && [ "$#" -eq 1 ]; then /bin/cat "{data}/info.txt"; exit {exit_code}; fi\n'
        f'if [ "$1 $2 $3" = "info -t board" ]; then /bin/cat "{data}/board.txt"; exit 0; fi\n'
        'echo "unsupported: $*" >&2; exit 2\n',
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


def board_with_firmware(version: str) -> str:
    """The captured `-t board` output with its Firmware Version line set to `version` (the capture comes
    from a machine on firmware 7.8.0.6.201; scenarios pair it with other installed firmware)."""
    lines = fixture_text("npu_smi_info_t_board_i0_910b.txt").splitlines()
    out = [line.split(":")[0] + ": " + version if "Firmware Version" in line else line for line in lines]
    return "\n".join(out) + "\n"


def make_ctx(tmp_path: Path, environ: dict[str, str] | None = None, **options) -> CheckContext:
    """A context that sees only what the test built: its own PATH, root, /dev and shm paths."""
    env = {"PATH": os.environ.get("PATH", "")} if environ is None else environ
    options.setdefault("ascend_root", tmp_path / "Ascend")
    options.setdefault("dev_dir", tmp_path / "dev")
    options.setdefault("shm_path", Path("/dev/shm"))
    options.setdefault("run_probe", False)
    options.setdefault("command_timeout_s", 20.0)
    return CheckContext.from_environment(env, **options)
