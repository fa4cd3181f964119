"""The sweep verb's execution flags: each bad value is one WorkbenchError naming the flag, before any server."""

from __future__ import annotations

import argparse

import pytest

from workbench.errors import WorkbenchError
from workbench.sweep.runner import Execution
from workbench.verbs import sweep as sweep_verb


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    sweep_verb.add_arguments(parser)
    return parser.parse_args(["--spec", "cpu-tiny", *argv])


def test_flags_make_the_execution():
    assert sweep_verb.execution_from(parse()) == Execution()
    got = sweep_verb.execution_from(parse("--parallel", "2", "--kv-budget", "4GiB", "--devices", "0-3"))
    assert got == Execution(parallel=2, devices=(0, 1, 2, 3), kv_budget_bytes=4 * 2**30)
    assert sweep_verb.execution_from(parse("--parallel", "auto", "--ray", "local")).mode.value == "ray"
    assert sweep_verb.execution_from(parse("--parallel", "auto")).parallel == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--parallel", "two"), "--parallel 'two'"),
        (("--parallel", "0"), "--parallel '0'"),
        (("--kv-budget", "lots"), "--kv-budget 'lots'"),
        (("--devices", "0-x"), "--devices '0-x'"),
        (("--retries", "-1"), "--retries -1"),
        (("--adaptive", "--parallel", "2"), "--adaptive decides each step"),
    ],
)
def test_bad_flags_are_one_clear_error(argv, message):
    with pytest.raises(WorkbenchError, match=message):
        sweep_verb.execution_from(parse(*argv))
