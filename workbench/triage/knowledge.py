"""The error-code knowledge base (`policy/triage/error_codes.yaml`), validated into frozen objects.

The file is data: what each CANN / AscendCL / aclnn / torch_npu / HCCL code means, the likely causes
ranked, the fix and the workbench step that verifies it, each cited. It is read through the project's one
recipe reader (`workbench.recipes.load_recipe_file`), so a malformed file is one `WorkbenchError` naming
the file and the entry (`policy/triage/error_codes.yaml: codes.507015.family: ...`).

Loading checks what a reader would otherwise trip over later: every code is written the way logs print
it, every family a code or signature names has its own advice, every citation is a reference key or an
https address (files in a code host pinned to a tag or commit, never a branch), every pattern compiles. Whether a
verify target exists in the workbench (an op of the suite, a feature, a check group, a recipe key) is
checked by the tests, which can afford to load those tables.
"""

from __future__ import annotations

import enum
import functools
import re
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from workbench import settings
from workbench.errors import WorkbenchError
from workbench.recipes import Frozen, load_recipe_file
from workbench.triage.kinds import FailureKind

# Codes as logs print them: six-digit aclError / runtime / aclnn codes, CANN message codes
# (E + module character + four digits), torch_npu codes (ERR + two-digit module + three-digit type).
CODE_FORMAT = re.compile(r"\d{6}|E[0-9A-Z]\d{4}|ERR\d{5}")
_FILE_REF = re.compile(r"https://[\w.-]+/[\w.-]+/[\w.-]+/(?:-/)?(?:blob|tree)/([\w.+-]+)/\S*")
_MOVING_REFS = frozenset({"main", "master", "develop", "HEAD", "latest"})

# How much a match counts when several in one error block point at different kinds (see the file header).
NUMERIC_CODE_PRIORITY = 80
MESSAGE_CODE_PRIORITY = 70
INTERNAL_MESSAGE_CODE_PRIORITY = 40
TORCH_NPU_CODE_PRIORITY = 30


class VerifyStep(str, enum.Enum):
    """Workbench steps that confirm a fix on the Ascend machine."""

    CHECK = "check"  # the pre-flight; target: a check group (workbench.envcheck.Group value)
    COMPARE_OPS = "compare-ops"  # the op suite; target: an op of recipes/ops (none: the op the log names)
    BISECT = "bisect"  # feature-by-feature enabling; target: a feature of recipes/features/ascend.yaml
    RECIPE = "recipe"  # change a serving-recipe key (target: e.g. engine.enforce_eager), then smoke
    SMOKE = "smoke"  # the first request on a server started from the recipe
    LINT = "lint"  # judge the serving command at its release (no target: the command the user ran)


class Verify(Frozen):
    step: VerifyStep
    target: str | None = None

    def command(self, op: str | None = None) -> str:
        """What the user runs: 'ascend-workbench compare-ops --op rms_norm'. `op` is the suite op the
        log's operator maps to; it fills a compare-ops step that names none."""
        if self.step is VerifyStep.CHECK:
            return "ascend-workbench check" + (f" (group {self.target})" if self.target else "")
        if self.step is VerifyStep.COMPARE_OPS:
            chosen = self.target or op
            return "ascend-workbench compare-ops" + (f" --op {chosen}" if chosen else "")
        if self.step is VerifyStep.BISECT:
            return "ascend-workbench bisect --recipe RECIPE" + (f" (feature {self.target})" if self.target else "")
        if self.step is VerifyStep.LINT:
            return "ascend-workbench lint YOUR_COMMAND_OR_RECIPE --release TAG"
        if self.step is VerifyStep.RECIPE:
            return f"change {self.target} in the serving recipe, then ascend-workbench smoke --recipe RECIPE"
        return "ascend-workbench smoke --recipe RECIPE"


class FamilyAdvice(Frozen):
    """What one failure kind is and what to do about it."""

    summary: str = Field(min_length=1)
    causes: tuple[str, ...] = Field(min_length=1)  # most likely first
    fix: str = Field(min_length=1)
    verify: Verify
    method: tuple[int, ...] = Field(min_length=1)  # sections of docs/METHOD.md
    cite: tuple[str, ...] = Field(min_length=1)


class Entry(Frozen):
    """What a code or a signature says about a block: its family and meaning, advice of its own where
    the family's does not fit, and whether it only follows from an earlier error."""

    family: FailureKind
    meaning: str = Field(min_length=1)
    causes: tuple[str, ...] | None = None
    fix: str | None = None
    verify: Verify | None = None
    consequence: bool = False  # follows from an earlier error: never the first error while a cause is logged
    cite: tuple[str, ...] = Field(min_length=1)


class CodeEntry(Entry):
    """One code, with the symbol or title the vendor gives it."""

    name: str | None = None


# Regular expression tokens that can match a line break or anchor at one.
LINE_CROSSING = ("\\s", "\\n", "\\W", "\\D", "[^", "^", "$")


def _regular_expression(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a regular expression ({exc})") from None
    return value


class SignatureEntry(Entry):
    """Words in a block that decide its kind, optionally only when the traceback passes through `frames`."""

    id: str = Field(min_length=1)
    pattern: str
    frames: str | None = None
    priority: int = Field(ge=0, le=100)
    in_warnings: bool = False  # also read on WARNING lines: a warning that names the failure before it happens

    @field_validator("pattern", "frames")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        return None if value is None else _regular_expression(value)

    @field_validator("pattern")
    @classmethod
    def _within_one_line(cls, value: str) -> str:
        """A signature is searched in a block's text at once, so it must not match across or anchor at a
        line break: the constructs that could are refused."""
        crossing = [token for token in LINE_CROSSING if token in value]
        if crossing:
            raise ValueError(f"matches one line at a time: use ' ' or '[ \\t]' instead of {', '.join(crossing)}")
        return value

    @functools.cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern)

    @functools.cached_property
    def frames_regex(self) -> re.Pattern[str] | None:
        return re.compile(self.frames) if self.frames else None


class OperatorEntry(Frozen):
    """Names a log gives one kernel (aclnn API, torch_npu function, CANN op type) -> the suite's op."""

    op: str
    names: tuple[str, ...] = Field(min_length=1)
    cite: tuple[str, ...] = Field(min_length=1)

    @field_validator("names")
    @classmethod
    def _compile(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_regular_expression(name) for name in names)

    @functools.cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile("|".join(f"(?:{n})" for n in self.names))


class CodeGrammar(Frozen):
    """How codes are built: enough to describe a code that has no entry of its own."""

    acl_classes: dict[str, str]  # first digit of a six-digit code
    acl_ranges: dict[str, str]  # first three digits -> the component
    message_modules: dict[str, str]  # second character of E?xxxx
    torch_npu_modules: dict[str, str]  # the two digits after ERR
    torch_npu_types: dict[str, str]  # the last three digits
    hccl_results: dict[str, str]  # HcclResult values printed as 'error code is N' by HCCL calls
    cite: tuple[str, ...] = Field(min_length=1)


class KnowledgeBase(Frozen):
    name: str
    description: str = ""
    references: dict[str, str]
    grammar: CodeGrammar
    families: dict[FailureKind, FamilyAdvice]
    codes: dict[str, CodeEntry]
    signatures: tuple[SignatureEntry, ...] = ()
    operators: tuple[OperatorEntry, ...] = ()
    # advice for a block with neither an Ascend code nor a signature it knows (the 'unknown' family's own
    # advice is about a code without an entry)
    uncoded: FamilyAdvice | None = None
    source: Path | None = None

    @field_validator("references")
    @classmethod
    def _references_are_addresses(cls, refs: dict[str, str]) -> dict[str, str]:
        for key, url in refs.items():
            _check_url(url, f"reference {key!r}")
        return refs

    @field_validator("codes")
    @classmethod
    def _codes_as_logs_print_them(cls, codes: dict[str, CodeEntry]) -> dict[str, CodeEntry]:
        for code in codes:
            if not CODE_FORMAT.fullmatch(code):
                raise ValueError(f"{code!r} is not a code as logs print it (507015, EZ9999, ERR00100)")
        return codes

    @model_validator(mode="after")
    def _consistent(self) -> KnowledgeBase:
        entries = [(f"codes.{k}", v) for k, v in self.codes.items()]
        entries += [(f"signatures.{s.id}", s) for s in self.signatures]
        for where, entry in entries:
            if entry.family not in self.families:
                raise ValueError(f"{where}: family {entry.family.value!r} has no entry under families")
        citing = [(f"families.{k.value}", v.cite) for k, v in self.families.items()]
        citing += [(where, e.cite) for where, e in entries] + [("grammar", self.grammar.cite)]
        citing += [(f"operators.{o.op}", o.cite) for o in self.operators]
        citing += [("uncoded", self.uncoded.cite)] if self.uncoded else []
        for where, cites in citing:
            for cite in cites:
                if cite not in self.references:
                    _check_url(cite, f"{where}: citation {cite!r} (neither a reference key nor an address)")
        ids = [s.id for s in self.signatures]
        if len(set(ids)) != len(ids):
            raise ValueError(f"signature ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")
        return self

    def cited(self, cites: tuple[str, ...]) -> tuple[str, ...]:
        """Citation keys resolved to their addresses."""
        return tuple(self.references.get(c, c) for c in cites)


def _check_url(url: str, what: str) -> None:
    """An https address; a file in a code host (GitHub, GitCode: /blob/<ref>/ or /tree/<ref>/) is pinned
    to a tag or commit, so what was read stays what is cited."""
    if not url.startswith("https://"):
        raise ValueError(f"{what} is not an https address")
    if "/blob/" in url or "/tree/" in url:
        pinned = _FILE_REF.fullmatch(url.split("#", 1)[0])
        if pinned is None or pinned.group(1) in _MOVING_REFS:
            raise ValueError(f"{what} must point at a file under a tag or commit, not a branch")


def default_path() -> Path:
    return settings.policy_dir() / "triage" / "error_codes.yaml"


@functools.lru_cache(maxsize=4)
def _load(path: Path, mtime_ns: int, size: int) -> KnowledgeBase:
    """Read once per file version: every log of a session is triaged against the same frozen table."""
    return load_recipe_file(
        KnowledgeBase, path, what="error-code knowledge base", required="'references', 'grammar', 'families'"
    )


def load_knowledge_base(path: str | Path | None = None) -> KnowledgeBase:
    """The knowledge base (default policy/triage/error_codes.yaml); one WorkbenchError for any problem."""
    path = Path(path) if path is not None else default_path()
    if not path.is_file():
        raise WorkbenchError(f"error-code knowledge base {path} not found; the shipped one is {default_path()}")
    stat = path.stat()
    return _load(path.resolve(), stat.st_mtime_ns, stat.st_size)
