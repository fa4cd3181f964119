"""The config-truth generator's source readers on small sources written for each shape vllm-ascend uses."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts" / "config_truth"))

from additional_reader import MISSING, read_additional_config  # noqa: E402
from envs_reader import read_direct, read_envs_table  # noqa: E402


def reads(source: str) -> dict[str, tuple]:
    found = read_additional_config({"vllm_ascend/ascend_config.py": source})
    return {r.path: (r.how, r.status, None if r.default is MISSING else r.default) for r in found.reads}


def test_envs_table_types_defaults_and_deprecation():
    text = """
import os
env_variables = {
    "MAX_JOBS": lambda: os.getenv("MAX_JOBS", None),
    "VLLM_X": lambda: bool(int(os.getenv("VLLM_X", "0"))),
    "VLLM_Y":
    # a comment between the key and its value
    lambda: int(os.getenv("VLLM_Y", 18 * 1024)),
    # DEPRECATED: use additional_config instead
    "VLLM_Z": lambda: os.getenv("VLLM_Z", "false").lower(),
}
"""
    table = {r.name: (r.type, r.default, r.deprecated) for r in read_envs_table(text)}
    assert table == {
        "MAX_JOBS": ("text", None, False),
        "VLLM_X": ("int01", "0", False),
        "VLLM_Y": ("int", "18432", False),
        "VLLM_Z": ("text_lower", "false", True),
    }


def test_direct_reads_are_loads_only():
    text = 'import os\na = os.getenv("HCCL_A", "1")\nb = os.environ["HCCL_B"]\nif "HCCL_C" in os.environ: pass\nos.environ["HCCL_D"] = "x"\n'
    assert [r.name for r in read_direct("f.py", text)] == ["HCCL_A", "HCCL_B", "HCCL_C"]


def test_keys_sections_and_classes_are_followed():
    source = """
class AscendConfig:
    def __init__(self, vllm_config):
        additional_config = vllm_config.additional_config if vllm_config.additional_config is not None else {}
        self.a = additional_config.get("a", 3)
        graph = additional_config.get("graph_config", {})
        self.graph = GraphConfig(graph, vllm_config)
        self.comp = CompConfig(**additional_config.get("comp_config", {}))
        if "old_key" in additional_config:
            raise ValueError("old_key was removed")

class GraphConfig:
    def __init__(self, graph_config, vllm_config):
        self.enabled = graph_config.get("enabled", False)

class CompConfig:
    def __init__(self, fuse: bool = True, **kwargs):
        self.extra = kwargs.get("extra", 1)
"""
    assert reads(source) == {
        "additional_config.a": ("get", "read", 3),
        "additional_config.graph_config": ("get", "read", {}),
        "additional_config.graph_config.enabled": ("get", "read", False),
        "additional_config.comp_config": ("get", "read", {}),
        "additional_config.comp_config.fuse": ("kwarg", "read", True),
        "additional_config.comp_config.extra": ("get", "read", 1),
        "additional_config.old_key": ("contains", "rejected", None),
    }


def test_a_section_that_raises_on_unknown_keys_is_rejected_and_its_defaults_are_keys():
    source = """
class AscendConfig:
    def __init__(self, vllm_config):
        additional_config = vllm_config.additional_config or {}
        self.rl = RlConfig(additional_config.get("rl_config", {}))

class RlConfig:
    _DEFAULTS = {"enabled": False, "level": 2}

    def __init__(self, config):
        unknown = set(config) - self._DEFAULTS.keys()
        if unknown:
            raise ValueError(f"Unknown keys {unknown}")
"""
    found = read_additional_config({"vllm_ascend/ascend_config.py": source})
    assert [(p.path, p.unknown_keys) for p in found.policies] == [("additional_config.rl_config", "rejected")]
    assert {r.path: r.default for r in found.reads if r.how == "defaults"} == {
        "additional_config.rl_config.enabled": False,
        "additional_config.rl_config.level": 2,
    }


def test_a_helper_called_with_a_key_name_reads_it_and_links_its_environment_fallback():
    source = """
import os

class AscendConfig:
    def __init__(self, vllm_config):
        additional_config = vllm_config.additional_config or {}
        self.mlapo = self._get_config_value(additional_config, "enable_mlapo", "VLLM_ASCEND_ENABLE_MLAPO", 1)

    @staticmethod
    def _get_config_value(additional_config, config_key, env_key, env_value):
        if config_key in additional_config:
            return additional_config[config_key]
        if env_key in os.environ:
            return env_value
        return env_value
"""
    found = read_additional_config({"vllm_ascend/ascend_config.py": source})
    assert "additional_config.enable_mlapo" in {r.path for r in found.reads}
    assert [(f.env, f.setting) for f in found.fallbacks] == [
        ("VLLM_ASCEND_ENABLE_MLAPO", "additional_config.enable_mlapo")
    ]


def test_a_read_in_a_branch_that_warns_deprecation_is_deprecated():
    source = """
class SchedulerConfig:
    def __init__(self, additional_config):
        scheduler_config = additional_config.get("scheduler_config") or {}
        if "recompute" in additional_config:
            logger.warning_once("additional_config.recompute is deprecated; use scheduler_config.recompute")
        self.recompute = scheduler_config.get("recompute", False)
"""
    got = reads(source)
    assert got["additional_config.recompute"][1] == "deprecated"
    assert got["additional_config.scheduler_config.recompute"][1] == "read"


@pytest.mark.parametrize("text", ["def broken(:\n", ""])
def test_a_file_that_does_not_parse_is_skipped(text):
    assert read_additional_config({"x.py": text}).reads == []


def test_values_a_class_checks_with_not_in_are_the_allowed_ones():
    source = """
class AscendConfig:
    def __init__(self, vllm_config):
        additional_config = vllm_config.additional_config or {}
        self.lb = LbConfig(additional_config.get("lb_config", {}))

class LbConfig:
    _valid_modes = {"static", "dynamic"}

    def __init__(self, user_config):
        self.mode = user_config.get("mode", "dynamic")
        self.stage = user_config.get("stage", "all")
        if not isinstance(self.mode, str) or self.mode not in self._valid_modes:
            raise ValueError("bad mode")
        if self.stage not in ["all", "prefill"]:
            raise ValueError("bad stage")
"""
    found = read_additional_config({"vllm_ascend/ascend_config.py": source})
    assert found.allowed == {
        "additional_config.lb_config.mode": ("dynamic", "static"),
        "additional_config.lb_config.stage": ("all", "prefill"),
    }
