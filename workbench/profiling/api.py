"""The profiling API: what the `ascend-workbench` verb and the notebook call (see the package docstring)."""

from __future__ import annotations

from workbench.profiling.profile import HostPhase, OpStat, Profile, ProfileFormat, StepShare
from workbench.profiling.read import read_profile
from workbench.profiling.verdicts import Verdict, VerdictKind, judge, load_thresholds

__all__ = [
    "HostPhase",
    "OpStat",
    "Profile",
    "ProfileFormat",
    "StepShare",
    "Verdict",
    "VerdictKind",
    "judge",
    "load_thresholds",
    "read_profile",
]
