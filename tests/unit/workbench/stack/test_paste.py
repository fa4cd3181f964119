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
        # LlamaFactory#6261: the chip named in Chinese prose after 昇腾 (Ascend), run into the words around it
        ("在昇腾910B3，cann 8.0.0.alpha002", {"chip": "910B3", "cann_toolkit": "8.0.0.alpha002"}),
        # vllm-ascend#12086: 'Ascend 310P' in a sentence names the card
        ("我们在 **Ascend 310P** 上复现了同样的问题", {"chip": "310P"}),
        # vllm-ascend#6018: a few Chinese words between 昇腾 and the chip ('Ascend environment 910B4')
        ("昇腾环境910B4", {"chip": "910B4"}),
        # Ascend/pytorch#99: the version before the name, '2.7.1 版本的 torch_npu' (version 2.7.1 of torch_npu)
        (
            "按照readme安装了2.7.1版本的torch_npu和CANN 8.3.RC1，在执行时报错",
            {"torch_npu": "2.7.1", "cann_toolkit": "8.3.RC1"},
        ),
        # vllm-ascend#8370: a label that goes on after the word 'version'
        ("- vLLM version shown in logs: `0.18.0`", {"vllm": "0.18.0"}),
        # LlamaFactory#4159: the CANN installer's file name states the toolkit it installs (the kernels
        # package beside it is not the toolkit)
        (
            "CANN toolkit = Ascend-cann-toolkit_8.0.RC1_linux-aarch64.run\nCANN kernels = Ascend-cann-kernels-910b_8.0.RC1_linux.run",
            {"cann_toolkit": "8.0.RC1"},
        ),
        # Ascend/pytorch#24, #7 (sixth round): '<name>版本<version>' with nothing between, or with 是 ("is") or a
        # few Chinese words ('驱动版本也核对无误7.0.RC1', the driver version, checked, is ...)
        ("torch版本2.1 python版本3.8 执行python3 -c", {"torch": "2.1", "python": "3.8"}),
        (
            "torch版本是2.1.0，驱动版本也核对无误7.0.RC1.alpha003， python3.8",
            {"torch": "2.1.0", "driver": "7.0.RC1.alpha003", "python": "3.8"},
        ),
        # vllm-ascend#8049 (eighth round): a pip-style list of the stack with 'toolkit' alone and the typo 'dirver'
        ("dirver==25.2.1\ntoolkit==8.5.1\nnnal==8.5.1", {"driver": "25.2.1", "cann_toolkit": "8.5.1"}),
        # vllm-ascend#6134 (sixth round): a name run into Chinese prose that holds an earlier Latin word
        ("ubuntu22.04，新建了conda环境并安装torch==2.8.0与torch+npu。", {"torch": "2.8.0"}),
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


def test_a_bare_chip_number_in_prose_is_not_read_without_the_word_ascend():
    """Only the word Ascend (or 昇腾) makes a number in running text a chip: '910 tokens' is not one."""
    assert "chip" not in read_paste("the prompt had 910 tokens and 310 words").versions


# Each way a paste arrives (benchmarks/mangling.py), on a collect_env fragment as vllm-ascend#5635 posted it.
COLLECT_ENV = """PyTorch version: 2.5.1
vLLM Version: 0.11.0
vLLM Ascend Version: 0.11.0
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| 0     910B                | OK            | 93.2        41                0    / 0             |"""
COLLECT_ENV_STATES = {"torch": "2.5.1", "vllm": "0.11.0", "vllm_ascend": "0.11.0", "chip": "910B"}


@pytest.mark.parametrize(
    "mangle",
    [
        lambda t: "\n".join(f"> {line}" for line in t.splitlines()),  # GitHub's "Quote reply"
        lambda t: "\n".join(f"> > {line}" for line in t.splitlines()),  # a quote of a quote
        lambda t: t.replace(": ", "\uff1a"),  # a Chinese input method's colon
        lambda t: t.replace(" ", "\u00a0"),  # no-break spaces, copied from a rendered page
    ],
    ids=["quoted", "quoted twice", "full-width colon", "no-break spaces"],
)
def test_a_mangled_collect_env_states_what_the_plain_one_does(mangle):
    assert read_paste(COLLECT_ENV).versions == COLLECT_ENV_STATES
    assert read_paste(mangle(COLLECT_ENV)).versions == COLLECT_ENV_STATES


@pytest.mark.parametrize(
    ("paste", "expected"),
    [
        # vllm-ascend#9376, wrapped by a browser between the name (run into Chinese prose) and its version
        ("物理机部署CANN\n9.0.0，固件与驱动版本为：driver_25.5.2_linux-aarch64", {"cann_toolkit": "9.0.0"}),
        # vllm-ascend#13050: npu-smi's header (which outranks the prose's shorter '25.2') wrapped after 'Version:'
        (
            "- 驱动版本：25.2\n| npu-smi 25.2.0                                   Version:\n25.2.0       |",
            {"driver": "25.2.0"},
        ),
    ],
)
def test_a_value_wrapped_onto_the_next_line_is_put_back_after_its_name(paste, expected):
    versions = read_paste(paste).versions
    assert {k: versions.get(k) for k in expected} == expected


def test_a_line_after_a_heading_is_not_joined_unless_it_starts_with_a_version():
    """'Versions of relevant libraries:' ends in a colon, but the pip lines after it start with '[pip3]', and
    '2 cards:' followed by a card count is no name: only a colon or a component's name takes the next version."""
    paste = "Versions of relevant libraries:\n[pip3] torch==2.5.1\nUsing 2 cards\n910B3 is the chip"
    assert read_paste(paste).versions.get("torch") == "2.5.1"
    assert "driver" not in read_paste("Power(W)\n93.2 41").versions
