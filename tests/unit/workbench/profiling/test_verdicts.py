"""Verdict thresholds on constructed profiles, just below and just above each line."""

from __future__ import annotations

import pytest

from workbench.errors import WorkbenchError
from workbench.profiling.profile import CPU_MAPPING, HostPhase, Profile, ProfileFormat, StepShare
from workbench.profiling.verdicts import ProfileFindingKind, judge, load_thresholds


def _profile(per_rank: dict[str, tuple[float, float, float]], steps: int = 4, host=(), phases=None) -> Profile:
    """Each rank gets `steps` identical steps of (computing, communication not overlapped, free) µs."""
    shares = [
        StepShare(rank, i, 0.0, c, m, 0.0, f, (phases or [""] * steps)[i])
        for rank, (c, m, f) in per_rank.items()
        for i in range(steps)
    ]
    return Profile("constructed", ProfileFormat.TORCH_TRACE, "cpu", CPU_MAPPING, tuple(shares), (), tuple(host))


def kinds(profile: Profile) -> set[ProfileFindingKind]:
    return {v.kind for v in judge(profile)}


def test_the_shipped_thresholds_are_the_methods():
    t = load_thresholds()
    assert (t.host_bound_busy_share, t.communication_share, t.slow_rank_spread) == (0.5, 0.2, 0.05)


def test_host_bound_below_half_busy_names_the_dominant_host_phase():
    host = [
        HostPhase("0", "between steps (engine loop: scheduling, IPC, output processing)", 2000.0, 4),
        HostPhase("0", "gpu_model_runner: sample", 500.0, 4),
        HostPhase("0", "gpu_model_runner: forward", 9e9, 4),
    ]
    (verdict,) = [v for v in judge(_profile({"0": (490.0, 0.0, 510.0)}, host=host))]
    assert verdict.kind is ProfileFindingKind.HOST_BOUND
    assert "between steps" in verdict.evidence and "49%" in verdict.evidence
    assert "max_num_seqs" in verdict.fix
    assert kinds(_profile({"0": (510.0, 0.0, 490.0)})) == {ProfileFindingKind.BALANCED}


def test_communication_over_a_fifth_says_lower_the_tp_degree():
    heavy = judge(_profile({"0": (600.0, 210.0, 190.0), "1": (600.0, 210.0, 190.0)}))
    (verdict,) = [v for v in heavy if v.kind is ProfileFindingKind.COMMUNICATION_BOUND]
    assert verdict.rank == "0,1" and "tensor_parallel_size" in verdict.fix
    assert ProfileFindingKind.COMMUNICATION_BOUND not in kinds(
        _profile({"0": (610.0, 190.0, 200.0), "1": (610.0, 190.0, 200.0)})
    )


def test_slow_rank_at_msprof_analyzes_five_percent_spread():
    # mean step 1000 µs: computing differs by 60 µs (6%) -> slow; by 40 µs (4%) -> not
    slow = judge(_profile({"0": (700.0, 100.0, 200.0), "1": (760.0, 40.0, 200.0)}))
    computing = [v for v in slow if v.kind is ProfileFindingKind.SLOW_RANK and v.evidence.startswith("Computing")]
    assert computing and computing[0].rank == "1"
    communication = [v for v in slow if v.evidence.startswith("Communication")]
    assert communication and communication[0].rank == "1"  # the others wait for it: least time waiting
    assert ProfileFindingKind.SLOW_RANK not in kinds(_profile({"0": (700.0, 100.0, 200.0), "1": (740.0, 60.0, 200.0)}))


def test_prefill_decode_bubbles():
    phases = ["decode", "decode", "decode", "prefill", "decode", "decode"]
    frees = [100.0, 100.0, 900.0, 100.0, 100.0, 100.0]  # the step before the switch idles 9x the usual
    steps = [StepShare("0", i, 0.0, 900.0, 0.0, 0.0, f, p) for i, (p, f) in enumerate(zip(phases, frees))]
    profile = Profile("c", ProfileFormat.TORCH_TRACE, "cpu", CPU_MAPPING, tuple(steps))
    (bubble,) = [v for v in judge(profile) if v.kind is ProfileFindingKind.BUBBLES]
    assert "1 of 2 prefill/decode switches" in bubble.evidence and "chunked prefill" in bubble.fix
    calm = [StepShare("0", i, 0.0, 900.0, 0.0, 0.0, 100.0, p) for i, p in enumerate(phases)]
    assert ProfileFindingKind.BUBBLES not in kinds(
        Profile("c", ProfileFormat.TORCH_TRACE, "cpu", CPU_MAPPING, tuple(calm))
    )


def test_thin_samples_and_empty_profiles():
    assert ProfileFindingKind.THIN_SAMPLE in kinds(_profile({"0": (900.0, 0.0, 100.0)}, steps=2))
    (empty,) = judge(Profile("c", ProfileFormat.MSPROF, "npu", "", (), notes=("no op_summary",)))
    assert empty.kind is ProfileFindingKind.NO_SHARES and "no op_summary" in empty.evidence


def test_thresholds_are_data(tmp_path):
    path = tmp_path / "strict.yaml"
    path.write_text("host_bound_busy_share: 0.95\n")
    assert ProfileFindingKind.HOST_BOUND in {
        v.kind for v in judge(_profile({"0": (900.0, 0.0, 100.0)}), load_thresholds(path))
    }
    path.write_text("host_bound_busy_shares: 0.95\n")
    with pytest.raises(WorkbenchError, match="did you mean 'host_bound_busy_share'"):
        load_thresholds(path)
