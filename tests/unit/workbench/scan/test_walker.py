"""Which files a scan reads: default ignores and their overrides, virtual environments by pyvenv.cfg,
symbolic links (followed once, loops and dangling links reported), kinds by name and by #! line."""

from __future__ import annotations

import os

from workbench.scan.file_kinds import FileKind
from workbench.scan.findings import ProblemKind
from workbench.scan.walker import DEFAULT_IGNORES, WalkOptions, walk

CUDA = "import torch\ntorch.cuda.synchronize()\n"


def _files(root, names):
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(CUDA)


def _found(result, root) -> list[str]:
    return sorted(os.path.relpath(c.path, root) for c in result.candidates)


def test_default_ignores_skip_tool_directories_and_virtual_environments(tmp_path):
    _files(tmp_path, ["app/model.py", ".git/hooks/pre-commit.py", "__pycache__/x.py", "node_modules/a/b.py",
                      "pkg.egg-info/setup.py", "env/lib/site.py", ".venv/lib/m.py"])  # fmt: skip
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    result = walk([str(tmp_path)])
    assert _found(result, tmp_path) == ["app/model.py"]
    assert dict(result.skipped)["virtual environment (env)"] == 1
    assert dict(result.skipped)["ignored directory (.git)"] == 1


def test_ignores_are_overridable(tmp_path):
    _files(tmp_path, ["app/model.py", ".venv/lib/m.py", "env/lib/site.py", "vendor/x.py"])
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    everything = walk([str(tmp_path)], WalkOptions(ignore=(), skip_virtualenvs=False))
    assert _found(everything, tmp_path) == [
        ".venv/lib/m.py",
        "app/model.py",
        "env/lib/site.py",
        "env/pyvenv.cfg",
        "vendor/x.py",
    ]
    more = walk([str(tmp_path)], WalkOptions(ignore=DEFAULT_IGNORES + ("vendor",)))
    assert _found(more, tmp_path) == ["app/model.py"]


def test_ignores_apply_below_the_given_path_not_to_it(tmp_path):
    _files(tmp_path, [".venv/lib/python3.11/site-packages/vllm/envs.py"])
    target = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages" / "vllm"
    assert [os.path.basename(c.path) for c in walk([str(target)]).candidates] == ["envs.py"]


def test_symlink_loop_is_reported_and_not_followed(tmp_path):
    _files(tmp_path, ["app/model.py"])
    os.symlink("..", tmp_path / "app" / "up")  # app/up -> tmp_path, an ancestor
    os.symlink("self", tmp_path / "self")  # resolves to itself: ELOOP
    result = walk([str(tmp_path)])
    assert _found(result, tmp_path) == ["app/model.py"]
    kinds = sorted((os.path.relpath(p.path, tmp_path), p.kind) for p in result.problems)
    assert kinds == [("app/up", ProblemKind.SYMLINK_LOOP), ("self", ProblemKind.SYMLINK_LOOP)]


def test_broken_symlink_is_reported(tmp_path):
    _files(tmp_path, ["app/model.py"])
    os.symlink("missing.py", tmp_path / "app" / "gone.py")
    [problem] = walk([str(tmp_path)]).problems
    assert problem.kind is ProblemKind.BROKEN_SYMLINK and "missing.py" in problem.message


def test_links_are_followed_but_a_target_is_scanned_once(tmp_path):
    _files(tmp_path, ["real/ops.py", "outside/lib.py"])
    os.symlink(tmp_path / "real" / "ops.py", tmp_path / "real" / "alias.py")
    os.symlink(tmp_path / "outside", tmp_path / "real" / "linked")
    result = walk([str(tmp_path / "real")])
    assert _found(result, tmp_path / "real") == ["alias.py", "linked/lib.py"]
    assert dict(result.skipped)["reached twice (link)"] == 1
    no_links = walk([str(tmp_path / "real")], WalkOptions(follow_symlinks=False))
    assert _found(no_links, tmp_path / "real") == ["ops.py"]


def test_kinds_by_name_and_by_shebang(tmp_path):
    (tmp_path / "serve").write_text("#!/usr/bin/env bash\nnvidia-smi\n")
    (tmp_path / "tool").write_text("#!/usr/bin/env python3\nimport pynvml\n")
    (tmp_path / "notes").write_text("plain text\n")
    (tmp_path / "requirements-gpu.txt").write_text("flash-attn\n")
    (tmp_path / "README.md").write_text("CUDA_VISIBLE_DEVICES\n")
    result = walk([str(tmp_path)])
    kinds = {os.path.basename(c.path): c.kind for c in result.candidates}
    assert kinds == {"serve": FileKind.SHELL, "tool": FileKind.PYTHON, "requirements-gpu.txt": FileKind.REQUIREMENTS}
    assert dict(result.skipped)["not a kind the scan reads"] == 2


def test_a_file_path_is_scanned_directly(tmp_path):
    _files(tmp_path, ["model.py"])
    assert [c.kind for c in walk([str(tmp_path / "model.py")]).candidates] == [FileKind.PYTHON]
