"""The profiling API: what `ascend-workbench profile` and notebook 08 call.

Reading any profile (`read_profile`), judging it (`judge` with `load_thresholds`), capturing one on a
recipe's server (`capture`), eager against compiled (`measure_graph_mode`), and notebook 08's session:
the profiles of one notebook run, labelled ('TP=1', 'TP=2', or the directory's name), with their
verdicts; every table it returns carries a `profile` column with that label. Kernel verdicts from
Ascend's counters (`judge_kernels` on a kernel_details.csv / op_summary_*.csv) and the idle causes of a
timeline with host links (`idle_causes` on a torch_npu trace_view.json or a CUDA torch.profiler trace).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.errors import WorkbenchError
from workbench.profiling import graph_mode as graph
from workbench.profiling.capture import CaptureWorkload, capture
from workbench.profiling.graph_mode import measure as measure_eager_and_compiled
from workbench.profiling.idle_causes import CauseTotal, IdleCause, classify_gaps, links_of, totals
from workbench.profiling.kernel_verdicts import (
    CoreCounts,
    KernelFinding,
    KernelVerdict,
    framework_bucket,
    judge_kernels,
)
from workbench.profiling.kernel_verdicts import verdicts_frame as kernel_verdicts_frame
from workbench.profiling.profile import HostPhase, OpStat, Profile, ProfileFormat, StepShare
from workbench.profiling.read import read_profile
from workbench.profiling.report import format_report, shares_table, summary, write_json
from workbench.profiling.verdicts import ProfileFinding, ProfileFindingKind, judge, load_thresholds, verdicts_frame
from workbench.recipes import load_serving_recipe
from workbench.results.envelope import DocumentKind, write_result
from workbench.settings import REPO_ROOT, run_dir
from workbench.stack.provenance import provenance

PROFILE_SESSION_KIND = DocumentKind("profile-session")

__all__ = [
    "CaptureWorkload",
    "CauseTotal",
    "CoreCounts",
    "IdleCause",
    "KernelFinding",
    "KernelVerdict",
    "framework_bucket",
    "idle_causes",
    "idle_causes_frame",
    "judge_kernels",
    "kernel_verdicts",
    "kernel_verdicts_frame",
    "sample_path",
    "HostPhase",
    "OpStat",
    "Profile",
    "ProfileFormat",
    "ProfileSession",
    "StepShare",
    "ProfileFinding",
    "ProfileFindingKind",
    "capture",
    "format_report",
    "judge",
    "load_thresholds",
    "measure_eager_and_compiled",
    "measure_graph_mode",
    "read_profile",
    "run_profiles",
    "save_session",
    "shares_table",
    "summary",
    "verdicts_frame",
    "write_json",
]


@dataclass(frozen=True)
class ProfileSession:
    """Labelled profiles with their verdicts, and the folder the session writes to."""

    out_dir: Path
    profiles: dict[str, Profile]
    verdicts: dict[str, list[ProfileFinding]]

    @property
    def mapping(self) -> str:
        """What the shares mean (the same for every profile of a session: one device)."""
        return next(iter(self.profiles.values())).mapping if self.profiles else ""

    def _labelled(self, frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
        parts = [frame.assign(profile=label) for label, frame in frames.items() if not frame.empty]
        if not parts:
            return pd.DataFrame()
        frame = pd.concat(parts, ignore_index=True)
        return frame[["profile", *[c for c in frame.columns if c != "profile"]]]

    def shares(self) -> pd.DataFrame:
        """Per profile and rank: step time and the shares (%), as the CLI prints them."""
        return self._labelled({label: shares_table(p) for label, p in self.profiles.items()})

    def ranks_by_label(self) -> dict[str, pd.DataFrame]:
        return {label: p.ranks_frame() for label, p in self.profiles.items()}

    def steps_frame(self) -> pd.DataFrame:
        """Every profile's steps; `rank` becomes '<label> rank <n>' so one chart shows them all."""
        frames = {
            label: p.steps_frame().assign(rank=lambda f, lb=label: lb + " rank " + f["rank"].astype(str))
            for label, p in self.profiles.items()
        }
        return self._labelled(frames)

    def ops_frame(self, top: int = 15) -> pd.DataFrame:
        return self._labelled({label: p.ops_frame(top) for label, p in self.profiles.items()})

    def top_ops(self, label: str | None = None, top: int = 15) -> pd.DataFrame:
        """The top ops of one profile (the last one by default: the highest TP degree)."""
        chosen = label or list(self.profiles)[-1]
        return self.profiles[chosen].ops_frame(top)

    def kinds_frame(self) -> pd.DataFrame:
        frames = {
            label: p.kinds_frame().assign(rank=lambda f, lb=label: lb + " rank " + f["rank"].astype(str))
            for label, p in self.profiles.items()
        }
        return self._labelled(frames)

    def host_frame(self) -> pd.DataFrame:
        return self._labelled({label: p.host_frame() for label, p in self.profiles.items()})

    def verdicts_frame(self) -> pd.DataFrame:
        return self._labelled({label: verdicts_frame(v) for label, v in self.verdicts.items()})


def run_profiles(
    recipe: str, tensor_parallel_sizes: list[int], profile_dir: str = "", num_prompts: int = 16
) -> ProfileSession:
    """Capture one profile per TP degree of `recipe`, or analyse `profile_dir` when it is given."""
    thresholds = load_thresholds()
    if profile_dir:
        profile = read_profile(profile_dir)
        profile = replace(profile, meta={**profile.meta, "provenance": provenance()})
        label = Path(profile_dir).name
        return ProfileSession(Path(profile_dir), {label: profile}, {label: judge(profile, thresholds)})
    base = load_serving_recipe(recipe)
    out = run_dir("profiles", base.name, fresh=True)
    profiles, verdicts = {}, {}
    for size in tensor_parallel_sizes:
        variant = base.with_overrides(engine={"tensor_parallel_size": size})
        label = f"TP={size}"
        result = capture(variant, out / label.replace("=", ""), CaptureWorkload(num_prompts=num_prompts))
        profiles[label], verdicts[label] = result.profile, judge(result.profile, thresholds)
    return ProfileSession(out, profiles, verdicts)


def measure_graph_mode(recipe: str, enabled: bool = True, repeats: int = 1) -> graph.GraphModeResult:
    """Eager against compiled on fixed and mixed lengths; an empty result when `enabled` is False."""
    if not enabled:
        return graph.GraphModeResult((), (), load_thresholds().graph_mode_gain)
    return graph.measure(load_serving_recipe(recipe), repeats=repeats)


def save_session(session: ProfileSession, graph_result: graph.GraphModeResult | None = None) -> Path:
    """Write the session's summaries, verdicts and graph-mode runs to `<out>/session.json` (with provenance)."""
    record: dict[str, Any] = {
        "profiles": {
            label: {"summary": summary(p, session.verdicts[label]), "source": p.source}
            for label, p in session.profiles.items()
        },
    }
    if graph_result is not None and graph_result.runs:
        record["graph_mode"] = {
            "ratios": graph_result.ratios().to_dict("records"),
            "conclusion": graph_result.conclusion(),
            "runs": graph_result.runs_frame().to_dict("records"),
            "starts": graph_result.starts_frame().to_dict("records"),
            "meta": graph_result.meta,
        }
    return write_result(session.out_dir / "session.json", record, provenance(), PROFILE_SESSION_KIND)


SAMPLES = REPO_ROOT / "tests" / "fixtures" / "profiling" / "samples"


def sample_path(name: str | Path) -> Path:
    """A file of yours, or one of the real profiler files the project ships by name (tests/fixtures/profiling/
    samples/, origins in its SOURCES.md)."""
    given = Path(name).expanduser()
    if given.exists():
        return given
    path = SAMPLES / str(name)
    if not path.is_file():
        shipped = ", ".join(sorted(p.name for p in SAMPLES.iterdir()))
        raise WorkbenchError(f"{name}: no such file, and no shipped sample of that name; the samples are: {shipped}")
    return path


def kernel_verdicts(counters: str | Path, cores: CoreCounts | None = None) -> list[KernelVerdict]:
    """`judge_kernels` on a kernel_details.csv / op_summary_*.csv of yours or a shipped sample's name."""
    return judge_kernels(sample_path(counters), cores)


def idle_causes(trace: Path | str, rank: str = "0") -> list[CauseTotal]:
    """Why the device idled, per cause, from a timeline with host links: a torch_npu trace_view.json (its
    async_npu and HostToDevice flows) or a CUDA torch.profiler trace (each kernel's launch)."""
    return totals(classify_gaps(links_of(sample_path(trace)), rank))


def idle_causes_frame(causes: list[CauseTotal]) -> pd.DataFrame:
    columns = ["rank", "cause", "gaps", "total_ms", "largest_ms", "share", "example"]
    return pd.DataFrame([c.row() for c in causes], columns=columns)
