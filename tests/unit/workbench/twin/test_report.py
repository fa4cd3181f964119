"""The verdict of a pair of runs under the shipped policy, raised by the measured noise."""

from __future__ import annotations

from workbench.results.verdict import Verdict
from workbench.twin.policy import load_thresholds
from workbench.twin.report import PairSummary, effective_tie_tolerance, judge


def pair(identical=10, near=0, diverged=0, failed=0, drift=0.0, label="A vs B") -> PairSummary:
    prompts = identical + near + diverged + failed
    return PairSummary(label, prompts, identical, near, diverged, failed, None, None, drift, 0.02)


def test_the_shipped_policy_reads_and_judges():
    policy = load_thresholds()
    assert policy.tie_tolerance_nats == 0.02 and policy.noise_factor == 3.0
    assert judge(pair(), None, policy).verdict is Verdict.PASS
    one = judge(pair(identical=9, diverged=1), None, policy)
    assert one.verdict is Verdict.ERROR and "10% > 0 (the policy)" in one.reasons[0]
    ties = judge(pair(identical=7, near=3), None, policy)
    assert ties.verdict is Verdict.WARNING and "near tie" in ties.reasons[0]
    assert judge(pair(drift=0.05), None, policy).verdict is Verdict.WARNING
    assert judge(pair(drift=0.5), None, policy).verdict is Verdict.ERROR
    assert judge(pair(identical=9, failed=1), None, policy).verdict is Verdict.ERROR


def test_noise_raises_every_limit_and_the_tie_tolerance():
    policy = load_thresholds()
    noise = pair(identical=8, diverged=2, drift=0.02, label="A vs A")
    assert effective_tie_tolerance(policy, noise) == 0.06  # 3 x the noise drift beats the policy's 0.02
    assert effective_tie_tolerance(policy, None) == 0.02
    # a configuration that diverges from itself on 20% of prompts: B diverging on 30% is within 3 x that
    judged = judge(pair(identical=7, diverged=3, drift=0.05), noise, policy)
    assert judged.verdict is Verdict.PASS, judged.reasons
    judged = judge(pair(identical=3, diverged=7, drift=0.05), noise, policy)
    assert judged.verdict is Verdict.ERROR and "3 x the noise" in judged.reasons[0]
