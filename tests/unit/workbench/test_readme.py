"""The front door: README.md is short, starts with the two commands, and every verb, notebook and page it
names exists (so the porting session a newcomer copies works)."""

from __future__ import annotations

import re

from tests.conftest import REPO_ROOT
from workbench.cli import _verb_modules

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_is_short_and_starts_with_the_two_commands():
    assert len(README.splitlines()) <= 200
    blocks = re.findall(r"```bash\n(.*?)```", README, flags=re.S)
    assert [b.strip() for b in blocks[:2]] == ["make run", "make test"]


def test_every_verb_in_the_porting_session_exists():
    verbs = set(_verb_modules())
    used = set(re.findall(r"ascend-workbench ([a-z][a-z-]+)", README))
    assert used and used <= verbs, f"README names verbs that do not exist: {sorted(used - verbs)}"


def test_every_notebook_is_listed_and_every_listed_one_exists():
    listed = set(re.findall(r"^\| `(\d\d_[a-z0-9_]+)` \|", README, flags=re.M))
    on_disk = {p.stem for p in (REPO_ROOT / "notebooks").glob("*.ipynb")}
    assert listed == on_disk


def test_every_linked_page_exists():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if not target.startswith("http"):
            assert (REPO_ROOT / target).exists(), f"README links to {target}, which does not exist"
