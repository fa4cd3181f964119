"""The mapping table: every scanner rule -> its Ascend counterpart, severity, verify step and citations.

The table is data (`policy/scan/cuda-mapping.yaml`), read through the project's one recipe reader
(`workbench.recipes.load_recipe_file`), so a typo in it fails with the file, the key and the closest
valid key. Loading also checks that the table and the scanner agree: a rule the scanner can report
without a row, or a row for a rule that does not exist, is an error — a finding must never lose its
meaning on the way to the report.

Every row cites where its counterpart is documented, pinned to a tag or commit (a branch name such as
`main` would let the citation drift from what was checked).
"""

from __future__ import annotations

import difflib
import enum
import functools
import re
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from workbench import settings
from workbench.errors import WorkbenchError
from workbench.recipes import Frozen, load_recipe_file
from workbench.scan.findings import Category, CudaTie, Hit, Severity
from workbench.scan.rule_ids import Rule

_PINNED_GITHUB = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/(?:blob|tree)/([\w.+-]+)/\S+")
_MOVING_REFS = frozenset({"main", "master", "develop", "HEAD", "latest"})


class VerifyStep(str, enum.Enum):
    """Workbench steps that confirm a change on the Ascend machine."""

    CHECK = "check"  # the pre-flight; target: a check group (workbench.check Group)
    COMPARE_OPS = "compare-ops"  # the op suite; target: an op of recipes/ops/*.yaml (none: every op)
    BISECT = "bisect"  # feature-by-feature enabling; target: a feature of recipes/features/ascend.yaml
    COMPARE_DUMPS = "compare-dumps"  # layer-by-layer outputs against the CPU float32 baseline
    SMOKE = "smoke"  # first request on a real server


class Verify(Frozen):
    step: VerifyStep
    target: str | None = None

    def command(self) -> str:
        """The command line a user runs, e.g. 'ascend-workbench compare-ops --op rms_norm'."""
        if self.step is VerifyStep.CHECK:
            group = f" (group {self.target})" if self.target else ""
            return f"ascend-workbench check{group}"
        if self.step is VerifyStep.COMPARE_OPS:
            return "ascend-workbench compare-ops" + (f" --op {self.target}" if self.target else "")
        if self.step is VerifyStep.BISECT:
            return "ascend-workbench bisect --recipe RECIPE" + (f" (feature {self.target})" if self.target else "")
        if self.step is VerifyStep.COMPARE_DUMPS:
            return "ascend-workbench dump + compare-dumps (NPU vs CPU float32)"
        return "ascend-workbench smoke --recipe RECIPE"


class MappingRow(Frozen):
    """What one rule's findings mean on Ascend."""

    category: Category
    detects: str = Field(min_length=1)
    counterpart: str = Field(min_length=1)
    severity: Severity
    verify: Verify
    method: tuple[int, ...] = (1,)  # sections of docs/METHOD.md that explain the step
    cite: tuple[str, ...] = Field(min_length=1)

    @field_validator("cite")
    @classmethod
    def _pinned(cls, urls: tuple[str, ...]) -> tuple[str, ...]:
        for url in urls:
            if not url.startswith("https://"):
                raise ValueError(f"citation {url!r} is not an https URL")
            pinned = _PINNED_GITHUB.fullmatch(url.split("#", 1)[0])
            if url.startswith("https://github.com/") and (pinned is None or pinned.group(1) in _MOVING_REFS):
                raise ValueError(f"citation {url!r} must point at a file under a tag or commit (/blob/<tag>/...)")
        return urls

    def method_sections(self) -> str:
        return "docs/METHOD.md " + ", ".join(f"§{n}" for n in self.method)


class TorchNpuNames(Frozen):
    """The names torch.npu provides: torch.cuda.<name> maps to torch.npu.<name> under transfer_to_npu."""

    cite: str
    names: tuple[str, ...] = Field(min_length=1)


class ScanMapping(Frozen):
    name: str
    description: str = ""
    references: dict[str, str] = Field(default_factory=dict)
    torch_npu_names: TorchNpuNames
    rules: dict[str, MappingRow]
    source: Path | None = None

    @field_validator("rules")
    @classmethod
    def _known_rules(cls, rules: dict[str, MappingRow]) -> dict[str, MappingRow]:
        known = [r.value for r in Rule]
        for key in rules:
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ValueError(f"row {key!r} is for a rule the scanner does not have{hint}")
        return rules

    @model_validator(mode="after")
    def _every_rule_mapped(self) -> ScanMapping:
        missing = [r.value for r in Rule if r.value not in self.rules]
        if missing:
            raise ValueError(f"rules without a row: {', '.join(missing)}; add one row per rule")
        return self

    @property
    def npu_names(self) -> frozenset[str]:
        return frozenset(self.torch_npu_names.names)

    def finding(self, hit: Hit) -> CudaTie:
        """The hit with its row's meaning joined in (for a vLLM graph option with a literal value, what
        vllm-ascend's platform does to that value, release range by release range)."""
        row = self.rules[hit.rule]
        counterpart = row.counterpart
        if hit.rule == Rule.VLLM_CUDAGRAPH_OPTION.value:
            counterpart += graph_option_rules(hit.detail)
        return CudaTie(
            file=hit.file,
            line=hit.line,
            column=hit.column,
            rule=hit.rule,
            category=row.category,
            excerpt=hit.excerpt,
            counterpart=counterpart,
            severity=row.severity,
            verify=f"{row.verify.command()}; {row.method_sections()}",
            detail=hit.detail,
        )


def graph_option_rules(detail: str) -> str:
    """'cudagraph_mode FULL_AND_PIECEWISE' -> '; vllm-ascend v0.11.0rc0..v0.20.2rc1 rewrites it to PIECEWISE
    (...)': the config-truth table's rules on that compilation_config key whose condition the value meets."""
    from workbench.truth.table import config_table

    key, _, value = detail.strip().partition(" ")
    key = key.lstrip("-").replace("-", "_")
    table = config_table()
    said = []
    for rule in table.rules:
        if rule.setting != f"compilation_config.{key}" or not value or not rule.when.holds(value.strip("'\"")):
            continue
        spans = ", ".join(s.first if s.first == s.last else f"{s.first}..{s.last}" for s in rule.spans)
        action = f"rewrites it to {rule.to}" if rule.action == "rewrite" else "refuses it"
        said.append(f"vllm-ascend {spans} {action} ({rule.reason}; {rule.spans[0].cite})")
    if not said:
        return ""
    return "; " + "; ".join(said) + "; `ascend-workbench lint` judges a whole serving command at your release"


def default_mapping_path() -> Path:
    return settings.policy_dir() / "scan" / "cuda-mapping.yaml"


@functools.lru_cache(maxsize=4)
def _load(path: Path, mtime_ns: int, size: int) -> ScanMapping:
    """Read once per file version: the table is frozen, so every scan of a session can share it (reading
    and validating its ~60 rows costs a tenth of a second, more than scanning a small service)."""
    return load_recipe_file(ScanMapping, path, what="scan mapping", required="'name', 'torch_npu_names' and 'rules'")


def load_mapping(path: str | Path | None = None) -> ScanMapping:
    """The mapping table (default policy/scan/cuda-mapping.yaml); one WorkbenchError for any problem."""
    path = Path(path) if path is not None else default_mapping_path()
    if not path.is_file():
        raise WorkbenchError(f"scan mapping {path} not found; the shipped one is {default_mapping_path()}")
    stat = path.stat()
    return _load(path.resolve(), stat.st_mtime_ns, stat.st_size)
