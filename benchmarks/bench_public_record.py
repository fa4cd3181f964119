"""The public record scoreboard: triage, the environment readers and `lint` against vllm-ascend's threads.

The corpus is `tests/fixtures/public/threads/*.yaml` (how it was built and how each verdict was read:
tests/fixtures/public/README.md, docs/public_record.md). Each thread falls in one half by a hash of its
name, fixed once: rules and parsers are tuned on the development half; the test half is only measured.
Per tool and half:

- triage: the share of logs it names a known family for (the rest is the `unknown` share), agreement
  with the family the thread supports (where it supports one), and the root code wherever the thread's log
  carries one;
- readers: the share of pastes from which every version the paste states is extracted (and each version's
  recall), and the versions read that the paste does not state (false reads); and the same share over every
  paste mangled each way a paste arrives (`paste_mangling`: quoted, folded, CRLF, indented, wrapped by a
  browser, full-width colons, no-break spaces), with the way that loses most;
- lint: the share of the problems the threads establish that it reproduces (a finding of the same class;
  and, looser, any warning or error on that setting), and false alarms: errors on settings the threads show
  working, per 20 such settings.

Targets (issue 47, on the test half): triage >= 90 % known families and every root code; readers every
version; lint >= 90 % of problems with at most 1 false alarm in 20 fine settings.

    .venv/bin/python benchmarks/bench_public_record.py [--worst 8] [--misses dev|both] [--json OUT]

Misses are listed for the development half only unless --misses both: reading the test half's misses is
how a held-out half stops being held out.

Exit 0 when the test half meets every target, 1 otherwise (the figures are printed either way).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

BENCHMARKS = Path(__file__).resolve().parent
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

from paste_mangling import MANGLINGS  # noqa: E402  (a sibling module: benchmarks/ is no package)

CORPUS = REPO_ROOT / "tests" / "fixtures" / "public" / "threads"
DEFAULT_REPO = "vllm-project/vllm-ascend"
HALVES = ("dev", "test")
TARGETS = {"triage_known": 0.90, "triage_codes": 1.0, "readers_all": 1.0, "lint_reproduced": 0.90}
FALSE_ALARMS_PER_20 = 1.0
READINGS = ("maintainer", "fix", "reporter", "log", "unclear")


# -- the corpus ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Thread:
    path: Path
    repo: str
    number: int | str  # an issue or pull request; 'docs/...md@TAG' for a page of the project's own docs
    data: dict[str, Any]

    @property
    def name(self) -> str:
        return f"{self.repo}#{self.number}"

    @property
    def half(self) -> str:
        return half_of(self.repo, self.number)


def half_of(repo: str, number: int | str) -> str:
    """The half a thread belongs to, fixed by a hash of its name: even first byte -> dev, odd -> test."""
    return HALVES[hashlib.sha256(f"{repo}#{number}".encode()).digest()[0] % 2]


def load_corpus(root: Path = CORPUS) -> list[Thread]:
    threads = []
    for path in sorted(root.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        thread = data["thread"]
        number = thread if isinstance(thread, int) else str(thread)
        threads.append(Thread(path, str(data.get("repo") or DEFAULT_REPO), number, data))
    return threads


def _url_pattern(t: Thread) -> str:
    """An issue or pull request's address; for a docs page, the file at its tag (and line)."""
    repo = re.escape(t.repo)
    if isinstance(t.number, int):
        return rf"https://github\.com/{repo}/(issues|pull)/{t.number}"
    path, _, tag = t.number.rpartition("@")
    path, _, anchor = path.partition("#")  # a page's second command is named by its line: PATH#L120@TAG
    if anchor:
        return rf"https://github\.com/{repo}/blob/{re.escape(tag)}/{re.escape(path)}#{re.escape(anchor)}"
    return rf"https://github\.com/{repo}/blob/{re.escape(tag)}/{re.escape(path)}(#L\d+)?"


def corpus_problems(threads: list[Thread]) -> list[str]:
    """What is wrong with the corpus files themselves (the unit tier asserts there is nothing)."""
    from workbench.triage.kinds import FailureKind

    families = {k.value for k in FailureKind}
    problems, seen = [], set()
    for t in threads:
        where = t.path.name
        if t.name in seen:
            problems.append(f"{where}: {t.name} appears twice")
        seen.add(t.name)
        url = t.data.get("url", "")
        if not re.fullmatch(_url_pattern(t), url):
            problems.append(f"{where}: url {url!r} is not {t.repo} #{t.number}")
        verdict = t.data.get("verdict") or {}
        if verdict.get("reading") not in READINGS or not verdict.get("says"):
            problems.append(f"{where}: verdict needs a reading ({', '.join(READINGS)}) and what it says")
        if not any(k in t.data for k in ("triage", "readers", "lint")):
            problems.append(f"{where}: no triage, readers or lint case")
        triage = t.data.get("triage")
        if triage is not None:
            if not str(triage.get("log") or "").strip():
                problems.append(f"{where}: triage case without a log")
            family = triage.get("family")
            if family is not None and family not in families:
                problems.append(f"{where}: family {family!r} is not a FailureKind")
            if verdict.get("reading") == "unclear" and family is not None:
                problems.append(f"{where}: an unclear verdict names no family")
        readers = t.data.get("readers")
        if readers is not None and not str(readers.get("paste") or "").strip():
            problems.append(f"{where}: readers case without a paste")
        lint = t.data.get("lint")
        if lint is not None and not str(lint.get("command") or "").strip():
            problems.append(f"{where}: lint case without a command")
    return problems


# -- scoring ----------------------------------------------------------------------------------------------


@dataclass
class Tally:
    """Counts of one tool on one half, and its misses (case, what was expected, what came out)."""

    counts: dict[str, int] = field(default_factory=dict)
    misses: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def share(self, hit: str, total: str) -> float | None:
        return self.counts.get(hit, 0) / self.counts[total] if self.counts.get(total) else None


def score_triage(thread: Thread, tally: Tally) -> None:
    from workbench.triage.api import triage_text
    from workbench.triage.kinds import FailureKind

    case = thread.data["triage"]
    report = triage_text(case["log"], source=thread.path.name)
    first = report.first
    kind = first.diagnosis.kind if first else FailureKind.UNKNOWN
    code = first.diagnosis.code.value if first and first.diagnosis.code else None
    tally.add("logs")
    if kind is not FailureKind.UNKNOWN:
        tally.add("known")
    else:
        lines = first.diagnosis.evidence if first else ()
        tally.misses.append((thread.name, "a known family", f"unknown (read: {' | '.join(lines)[:160]})"))
    if case.get("family"):
        tally.add("with_family")
        if kind.value == case["family"]:
            tally.add("family_agrees")
        elif kind is not FailureKind.UNKNOWN:
            tally.misses.append((thread.name, f"family {case['family']}", f"family {kind.value}"))
    if case.get("code"):
        tally.add("with_code")
        if code == str(case["code"]):
            tally.add("code_agrees")
        else:
            tally.misses.append((thread.name, f"root code {case['code']}", f"code {code}"))


def score_readers(thread: Thread, tally: Tally) -> None:
    from workbench.stack.paste import read_paste

    case = thread.data["readers"]
    expected = {k: str(v) for k, v in (case.get("versions") or {}).items()}
    got = read_paste(case["paste"]).versions
    tally.add("pastes")
    wrong = [k for k, v in expected.items() if not same_version(got.get(k), v, k)]
    tally.add("versions", len(expected))
    tally.add("versions_read", len(expected) - len(wrong))
    extra = [k for k, v in got.items() if k not in expected and k in KNOWN_VERSION_KEYS]
    tally.add("false_reads", len(extra))
    if not wrong:
        tally.add("all_read")
    else:
        said = ", ".join(f"{k}={got.get(k)!r} (paste: {expected[k]})" for k in wrong)
        tally.misses.append((thread.name, "every version", said))
    if extra:
        tally.misses.append((thread.name, "no versions the paste does not state", ", ".join(extra)))
    for way, mangle in MANGLINGS.items():
        got = read_paste(mangle(case["paste"])).versions
        lost = [k for k, v in expected.items() if not same_version(got.get(k), v, k)]
        tally.add(f"mangled:{way}")
        tally.add(f"mangled_read:{way}", 0 if lost else 1)
        if lost and not wrong:  # a paste read whole as posted that this way of pasting breaks
            tally.misses.append(
                (thread.name, f"every version once {way}", ", ".join(f"{k}={got.get(k)!r}" for k in lost))
            )
        tally.add("mangled_false_reads", sum(1 for k in got if k not in expected and k in KNOWN_VERSION_KEYS))


KNOWN_VERSION_KEYS = (
    "torch",
    "torch_npu",
    "vllm",
    "vllm_ascend",
    "transformers",
    "python",
    "cann_toolkit",
    "driver",
    "firmware",
    "chip",
    "triton_ascend",
)


def same_version(got: str | None, expected: str, key: str = "") -> bool:
    """Equal as written, but for spacing, case and a leading 'v' (and, for a chip, the 'Ascend' brand:
    Ascend310P3 is the 310P3)."""
    if got is None:
        return False

    def norm(text: str) -> str:
        text = re.sub(r"\s+", "", str(text)).lower().lstrip("v")
        return text.removeprefix("ascend") if key == "chip" else text

    return norm(got) == norm(expected)


def score_lint(thread: Thread, tally: Tally) -> None:
    from workbench.lint.api import lint_parsed
    from workbench.lint.command import parse_text

    case = thread.data["lint"]
    report = lint_parsed(
        parse_text(case["command"], thread.path.name), release=case.get("release"), model_type=case.get("model_type")
    )
    tally.add("commands")
    for problem in case.get("problems") or ():
        found = _covering(report, problem["setting"])
        tally.add("problems")
        if any(f.finding.value in REPRODUCES.get(problem["finding"], (problem["finding"],)) for f in found):
            tally.add("reproduced")
        else:
            said = ", ".join(f"{f.finding.value}: {f.reason[:80]}" for f in found) or "nothing"
            tally.misses.append((thread.name, f"{problem['setting']} {problem['finding']}", said))
        if any(f.severity.value != "pass" for f in found):
            tally.add("flagged")
    for setting in case.get("fine") or ():
        tally.add("fine")
        found = _covering(report, setting)
        errors = [f for f in found if f.severity.value == "error"]
        if errors:
            tally.add("false_alarms")
            tally.misses.append((thread.name, f"{setting} fine", f"{errors[0].finding.value}: {errors[0].reason[:90]}"))


# A finding that says more than the problem names still reproduces it: `renamed` is `dead` (the name is not read
# at the release) plus where its value goes now.
REPRODUCES = {"dead": ("dead", "renamed")}


def _covering(report: Any, setting: str) -> list[Any]:
    return [f for f in report.findings if f.setting == setting or setting.startswith(f.setting + ".")]


SCORERS = {"triage": score_triage, "readers": score_readers, "lint": score_lint}


def score(threads: list[Thread]) -> dict[str, dict[str, Tally]]:
    """{tool: {half: tally}} over every case of the corpus."""
    board = {tool: {half: Tally() for half in HALVES} for tool in SCORERS}
    for thread in threads:
        for tool, scorer in SCORERS.items():
            if tool in thread.data:
                scorer(thread, board[tool][thread.half])
    return board


def figures(board: dict[str, dict[str, Tally]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for half in HALVES:
        t, r, lint = board["triage"][half], board["readers"][half], board["lint"][half]
        fine = lint.counts.get("fine", 0)
        out[half] = {
            "threads": None,
            "triage_logs": t.counts.get("logs", 0),
            "triage_known": t.share("known", "logs"),
            "triage_unknown": 1 - t.share("known", "logs") if t.counts.get("logs") else None,
            "triage_family_agrees": t.share("family_agrees", "with_family"),
            "triage_codes": t.share("code_agrees", "with_code"),
            "triage_with_family": t.counts.get("with_family", 0),
            "triage_with_code": t.counts.get("with_code", 0),
            "readers_pastes": r.counts.get("pastes", 0),
            "readers_all": r.share("all_read", "pastes"),
            "readers_version_recall": r.share("versions_read", "versions"),
            "readers_false_reads": r.counts.get("false_reads", 0),
            "readers_mangled": {way: r.share(f"mangled_read:{way}", f"mangled:{way}") for way in MANGLINGS},
            "readers_mangled_false_reads": r.counts.get("mangled_false_reads", 0),
            "lint_commands": lint.counts.get("commands", 0),
            "lint_problems": lint.counts.get("problems", 0),
            "lint_reproduced": lint.share("reproduced", "problems"),
            "lint_flagged": lint.share("flagged", "problems"),
            "lint_fine": fine,
            "lint_false_alarms": lint.counts.get("false_alarms", 0),
            "lint_false_alarms_per_20": 20 * lint.counts.get("false_alarms", 0) / fine if fine else None,
        }
    return out


def meets_targets(half: dict[str, Any]) -> list[str]:
    """The targets the half misses (empty: all met); a figure with no cases is not a miss."""
    missed = [
        f"{key} {half[key]:.0%} < {target:.0%}"
        for key, target in TARGETS.items()
        if half.get(key) is not None and half[key] < target
    ]
    per20 = half.get("lint_false_alarms_per_20")
    if per20 is not None and per20 > FALSE_ALARMS_PER_20:
        missed.append(f"lint false alarms {per20:.1f} per 20 fine settings > {FALSE_ALARMS_PER_20:g}")
    return missed


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def render(
    threads: list[Thread], board: dict[str, dict[str, Tally]], figs: dict[str, Any], worst: int, halves: tuple[str, ...]
) -> Iterator[str]:
    for half in HALVES:
        f = figs[half]
        n = sum(1 for t in threads if t.half == half)
        yield f"== {half} half: {n} threads"
        yield (
            f"triage  {f['triage_logs']} logs: known family {_pct(f['triage_known'])} (unknown "
            f"{_pct(f['triage_unknown'])}), agrees with the thread {_pct(f['triage_family_agrees'])} of "
            f"{f['triage_with_family']}, root code {_pct(f['triage_codes'])} of {f['triage_with_code']}"
        )
        yield (
            f"readers {f['readers_pastes']} pastes: every version read {_pct(f['readers_all'])}, version recall "
            f"{_pct(f['readers_version_recall'])}, false reads {f['readers_false_reads']}"
        )
        mangled = {way: share for way, share in f["readers_mangled"].items() if share is not None}
        if mangled:
            lowest = min(mangled, key=lambda way: mangled[way])
            yield (
                f"        mangled {len(mangled)} ways: every version read {_pct(sum(mangled.values()) / len(mangled))} "
                f"(lowest {lowest} {_pct(mangled[lowest])}), false reads {f['readers_mangled_false_reads']}"
            )
        per20 = f["lint_false_alarms_per_20"]
        yield (
            f"lint    {f['lint_commands']} commands: problems reproduced {_pct(f['lint_reproduced'])} of "
            f"{f['lint_problems']} (flagged at all {_pct(f['lint_flagged'])}), false alarms "
            f"{f['lint_false_alarms']} in {f['lint_fine']} fine settings"
            + (f" ({per20:.1f} per 20)" if per20 is not None else "")
        )
        for tool in SCORERS if half in halves else ():
            for case, wanted, got in board[tool][half].misses[:worst]:
                yield f"  miss [{tool}] {case}: expected {wanted}; got {got}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worst", type=int, default=8, help="misses listed per tool and half")
    parser.add_argument("--misses", choices=("dev", "both"), default="dev", help="whose misses to list (default dev)")
    parser.add_argument("--json", type=Path, help="write the figures (and the listed halves' misses) to this file")
    args = parser.parse_args()
    start = time.perf_counter()
    threads = load_corpus()
    problems = corpus_problems(threads)
    if problems:
        print("the corpus has problems:\n  " + "\n  ".join(problems))
        return 2
    board = score(threads)
    figs = figures(board)
    for half in HALVES:
        figs[half]["threads"] = sum(1 for t in threads if t.half == half)
    shown = HALVES if args.misses == "both" else ("dev",)
    for line in render(threads, board, figs, args.worst, shown):
        print(line)
    missed = meets_targets(figs["test"])
    seconds = time.perf_counter() - start
    print(
        f"scored {len(threads)} threads in {seconds:.1f} s; test half: "
        + ("every target met" if not missed else "; ".join(missed))
    )
    if args.json:
        from workbench.results.files import write_json
        from workbench.stack.provenance import provenance

        misses = {tool: {h: board[tool][h].misses for h in shown} for tool in SCORERS}
        write_json(args.json, {"provenance": provenance(), "figures": figs, "misses": misses, "seconds": seconds})
        print(f"wrote {args.json}")
    return 0 if not missed else 1


if __name__ == "__main__":
    sys.exit(main())
