"""Snapshot of each matrix tag's `vllm_ascend/envs.py` (names and defaults), read with plain regular
expressions, for the table-fidelity test.

    python scripts/config_truth/envs_snapshot.py --mirror PATH     # writes tests/fixtures/config_truth/envs_per_tag.json

The generator reads envs.py through the AST (`envs_reader`); this reads the same files a second, simpler
way, so `tests/unit/ascend_backend/npu/test_config_table.py` can check the checked-in table against the
source without a mirror: two readers that agree on every tag, or a test that names the first difference.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from generate import ROOT, matrix_tags  # noqa: E402
from mirror import Mirror  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "config_truth" / "envs_per_tag.json"
# "NAME": [comment lines] lambda: <anything>(os.getenv("NAME", DEFAULT)...  or  os.environ.get("NAME", DEFAULT)
ENTRY = re.compile(
    r'^\s*"(?P<name>[A-Z][A-Z0-9_]*)"\s*:\s*(?:#[^\n]*\n\s*)*lambda\s*:(?P<body>.*?)(?=^\s*"[A-Z][A-Z0-9_]*"\s*:|^\}|\Z)',
    re.M | re.S,
)
GETTER = re.compile(
    r'os\.(?:getenv|environ\.get)\(\s*["\'](?P<name>[A-Z0-9_]+)["\']\s*(?:,\s*(?P<default>[^)]*?))?\s*\)', re.S
)


def default_of(text: str | None) -> str | None:
    if text is None:
        return None
    text = text.strip()
    if text == "None":
        return None
    if re.fullmatch(r"[\d\s*+]+", text):
        return str(eval(text, {"__builtins__": {}}))  # noqa: S307 - digits and * only
    return text.strip("'\"")


def snapshot(text: str) -> dict[str, str | None]:
    found = {}
    for entry in ENTRY.finditer(text):
        getter = GETTER.search(entry.group("body"))
        if getter is None or getter.group("name") != entry.group("name"):
            continue
        found[entry.group("name")] = default_of(getter.group("default"))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", required=True)
    args = parser.parse_args()
    mirror = Mirror.open(args.mirror)
    data = {tag: snapshot(mirror.show(tag, "vllm_ascend/envs.py") or "") for tag in matrix_tags(mirror)}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"main": mirror.commit("main"), "tags": data}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}: {sum(len(v) for v in data.values())} entries over {len(data)} tags")
    return 0


if __name__ == "__main__":
    sys.exit(main())
