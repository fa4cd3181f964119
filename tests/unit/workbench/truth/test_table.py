"""The checked-in config-truth table against the source it was generated from.

`tests/fixtures/config_truth/envs_per_tag.json` is every matrix tag's `vllm_ascend/envs.py` read with
plain regular expressions (scripts/config_truth/envs_snapshot.py), independently of the generator's AST
reader: for every tag the table's envs.py names and defaults must equal it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.truth.table import MAIN, SettingKind, config_table

SNAPSHOT = json.loads(
    (Path(__file__).resolve().parents[3] / "fixtures" / "config_truth" / "envs_per_tag.json").read_text()
)
TABLE = config_table()


def test_the_snapshot_and_the_table_read_the_same_main():
    assert SNAPSHOT["main"] == TABLE.main_commit
    assert list(SNAPSHOT["tags"]) == list(TABLE.tags)


@pytest.mark.parametrize("tag", list(SNAPSHOT["tags"]))
def test_env_names_and_defaults_equal_that_tags_envs_py(tag):
    expected = SNAPSHOT["tags"][tag]
    table = {}
    for name in TABLE.names_at(SettingKind.ENV, tag):
        span = TABLE.setting_at(name, tag)
        if span.get("where") == "envs.py":
            table[name.split(".", 1)[1]] = span.facts.get("default")
    assert table == expected


def test_every_span_cites_a_tag_inside_it_and_tags_are_ordered():
    for setting in TABLE.settings.values():
        for span in setting.spans:
            tag = span.cite.split(":", 1)[0]
            assert TABLE.covers(span, tag), (setting.setting, span)
    assert TABLE.tags[-1] == MAIN


def test_releases_between_tags_map_to_the_newest_older_tag():
    assert TABLE.tag_for("v0.11.0") == ("v0.11.0", "v0.11.0")
    assert TABLE.tag_for("0.12.3")[0] == "v0.12.0rc1"
    assert TABLE.tag_for("9.0")[0] == MAIN
    with pytest.raises(ValueError, match="older than"):
        TABLE.tag_for("0.1.0")
    with pytest.raises(ValueError, match="not a vllm-ascend release"):
        TABLE.tag_for("banana")


def test_vllm_versions_pair_with_each_release_and_keep_their_flags():
    (vllm,) = TABLE.vllm_for("v0.13.0")
    assert vllm.version == "0.13.0" and "--tensor-parallel-size" in vllm.flags
    assert vllm.aliases["-tp"] == "--tensor-parallel-size" and "cudagraph_mode" in vllm.compilation_keys
    assert "VLLM_USE_V1" in TABLE.vllm["0.11.0"].envs and "VLLM_USE_V1" not in vllm.envs
