"""Reading serving commands and scripts: shell words with offsets, the settings each command makes."""

from __future__ import annotations

import pytest

from workbench.lint.command import LintInputError, parse_argv, parse_text
from workbench.lint.shell import ShellSyntaxError, commands


def _settings(text: str) -> list[tuple[str, object, int]]:
    return [(o.setting, o.value, o.line) for o in parse_text(text).occurrences]


def test_words_keep_their_offsets_through_quotes_and_continuations():
    text = 'A=1 vllm serve m \\\n  --x \'a b\' "c\\"d"  # comment\nnext'
    first, second = commands(text)
    assert [w.text for w in first.words] == ["A=1", "vllm", "serve", "m", "--x", "a b", 'c"d']
    quoted = first.words[5]
    assert text[quoted.start : quoted.end] == "'a b'" and quoted.line == 2
    assert [w.text for w in second.words] == ["next"] and second.line == 3


def test_redirections_and_background_do_not_split_a_command():
    (command,) = commands("vllm serve m --port 8000 > log.txt 2>&1 &")
    assert [w.text for w in command.words] == ["vllm", "serve", "m", "--port", "8000", ">", "log.txt", "2>&1"]


def test_an_unclosed_quote_names_its_line():
    with pytest.raises(ShellSyntaxError, match=r"x.sh:2: a single quote"):
        commands('export A=1\nvllm serve m --additional-config \'{"a": 1}', "x.sh")


def test_exports_prefixes_and_vllm_serve_flags():
    text = (
        "#!/bin/bash\n"
        "export HCCL_BUFFSIZE=1024 TASK_QUEUE_ENABLE=1\n"
        "ASCEND_RT_VISIBLE_DEVICES=0,1 nohup vllm serve /models/q --tensor_parallel_size=2 --enforce-eager \\\n"
        "   --max-model-len 4096 > out.log 2>&1 &\n"
    )
    parsed = parse_text(text)
    assert _settings(text) == [
        ("env.HCCL_BUFFSIZE", "1024", 2),
        ("env.TASK_QUEUE_ENABLE", "1", 2),
        ("env.ASCEND_RT_VISIBLE_DEVICES", "0,1", 3),
        ("flag.--tensor-parallel-size", "2", 3),
        ("flag.--enforce-eager", None, 3),
        ("flag.--max-model-len", "4096", 4),
    ]
    assert parsed.model == "/models/q"


def test_the_api_server_module_and_json_configs_become_dotted_settings():
    text = (
        "python -m vllm.entrypoints.openai.api_server --model m \\\n"
        '  --additional-config \'{"torchair_graph_config": {"enabled": true}, "refresh": true}\' \\\n'
        "  --compilation-config.cudagraph_mode FULL_DECODE_ONLY -O3\n"
    )
    assert _settings(text) == [
        ("flag.--model", "m", 1),
        ("flag.--additional-config", '{"torchair_graph_config": {"enabled": true}, "refresh": true}', 2),
        ("additional_config.torchair_graph_config.enabled", True, 2),
        ("additional_config.refresh", True, 2),
        ("compilation_config.cudagraph_mode", "FULL_DECODE_ONLY", 3),
        ("flag.-O", "3", 3),
    ]


def test_json_that_does_not_parse_is_one_message_with_flag_line_and_column():
    text = "vllm serve m \\\n --additional-config '{\"a\": 1,}'"
    with pytest.raises(LintInputError, match=r"cmd:2: the value of --additional-config is not JSON .* column 9"):
        parse_text(text, "cmd")


def test_a_terminal_paste_with_prompts_is_read_as_the_command():
    text = "root@host:/ws# vllm serve /m \\\n> --port 8000 \\\n> --enforce-eager\n"
    assert [s for s, _, _ in _settings(text)] == ["flag.--port", "flag.--enforce-eager"]


def test_a_flags_only_fragment_is_read():
    assert [s for s, _, _ in _settings("--max-num-seqs 8 \\\n --enforce-eager")] == [
        "flag.--max-num-seqs",
        "flag.--enforce-eager",
    ]


def test_a_second_json_config_replaces_the_first_whole():
    text = 'vllm serve m --compilation-config \'{"level": 3}\' --compilation-config \'{"cudagraph_mode": "FULL"}\''
    settings = [s for s, _, _ in _settings(text)]
    assert "compilation_config.level" not in settings  # never takes effect
    assert settings.count("flag.--compilation-config") == 2  # both reported: the first as a duplicate


def test_argv_and_environment_of_a_recipe_point_at_the_yaml_keys():
    text = "name: x\nmodel: m\nengine:\n  block_size: 128\nenv:\n  HCCL_BUFFSIZE: '512'\n"
    parsed = parse_argv(("--block-size", "128"), {"HCCL_BUFFSIZE": "512"}, "x.yaml", text)
    assert [(o.setting, o.line) for o in parsed.occurrences] == [("env.HCCL_BUFFSIZE", 6), ("flag.--block-size", 4)]
