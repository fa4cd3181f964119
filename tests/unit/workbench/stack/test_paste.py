"""How pasted environment reports are read (workbench.stack.paste), on the shapes the public record showed:
each case is a line as a thread posted it (tests/fixtures/public/threads) and what it states, and the
near-misses that must not be read as versions."""

from __future__ import annotations

import pytest

from workbench.stack.paste import read_paste


@pytest.mark.parametrize(
    ("paste", "expected"),
    [
        # PaddleOCR#17634: a package name hyphen-joined to its version, names run into versions after Chinese
        (
            "vllm=0.14.0和vllm-ascend-0.14.0rc2以及CANN8.2RC 无法正确跑通",
            {"vllm": "0.14.0", "vllm_ascend": "0.14.0rc2", "cann_toolkit": "8.2RC"},
        ),
        # a wheel's file name states the version it installs
        ("pip install torch_npu-2.5.1.post1-cp310-cp310-manylinux.whl", {"torch_npu": "2.5.1.post1"}),
        # vllm-ascend#3479: the card named alone on its line
        ("310p \nquay.io/ascend/vllm-ascend:v0.11.0rc0-310p-openeuler", {"chip": "310p", "vllm_ascend": "0.11.0rc0"}),
    ],
)
def test_free_text_states_its_versions(paste, expected):
    versions = read_paste(paste).versions
    assert {k: versions.get(k) for k in expected} == expected


def test_a_conda_environment_named_after_python_states_no_python_version():
    """vllm#22518: '(python-3.9.10) [ma-user work]$' is a prompt; only package names join their version with '-'."""
    assert "python" not in read_paste("(python-3.9.10) [ma-user work]$python collect_env.py").versions


def test_a_value_stops_where_chinese_text_starts():
    assert read_paste("torch 2.5.1版本和torch_npu 2.5.1").versions == {"torch": "2.5.1", "torch_npu": "2.5.1"}
