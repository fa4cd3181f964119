"""Output comparison rules with exact expectations."""

from __future__ import annotations

import math

from workbench.bisect.outputs import GreedyOutput, Match, compare_outputs


def out(tokens, logprobs, top=None, prompt="p"):
    top = top or [[(t, lp)] for t, lp in zip(tokens, logprobs)]
    return GreedyOutput(prompt, tuple(tokens), tuple(logprobs), tuple(tuple(p) for p in top), "")


BASE = out([5, 6, 7], [-0.1, -0.5, -1.0], top=[[(5, -0.1), (9, -3.0)], [(6, -0.5), (8, -0.52)], [(7, -1.0)]])


def test_identical_is_exact():
    cmp = compare_outputs([BASE], [out([5, 6, 7], [-0.1, -0.51, -1.0])], tolerance=0.05)
    assert cmp.match is Match.EXACT and math.isclose(cmp.max_drift, 0.01, abs_tol=1e-9)


def test_logprob_drift_beyond_tolerance_on_same_tokens():
    cmp = compare_outputs([BASE], [out([5, 6, 7], [-0.1, -0.8, -1.0])], tolerance=0.05)
    assert cmp.match is Match.DRIFT and "token 1" in cmp.detail


def test_flip_at_a_near_tie_is_accepted():
    # position 1: baseline picked 6 at -0.5 and ranked 8 at -0.52 (0.02 nats apart)
    cmp = compare_outputs([BASE], [out([5, 8, 1], [-0.1, -0.5, -0.3])], tolerance=0.05)
    assert cmp.match is Match.NEAR_TIE and cmp.match.ok


def test_flip_without_a_tie_is_wrong():
    cmp = compare_outputs([BASE], [out([9, 6, 7], [-0.2, -0.5, -1.0])], tolerance=0.05)  # 9 was 2.9 nats behind
    assert cmp.match is Match.WRONG and not cmp.match.ok


def test_nan_logprobs():
    cmp = compare_outputs([BASE], [out([5, 6, 7], [-0.1, float("nan"), -1.0])], tolerance=0.05)
    assert cmp.match is Match.NAN


def test_worst_prompt_decides():
    good = out([5, 6, 7], [-0.1, -0.5, -1.0], prompt="a")
    bad = out([1, 1, 1], [-0.1, -0.5, -1.0], prompt="b")
    cmp = compare_outputs([BASE, BASE], [good, bad], tolerance=0.05)
    assert cmp.match is Match.WRONG and "token 0: 1 instead of 5" in cmp.detail


def test_json_round_trip():
    assert GreedyOutput.from_dict(BASE.to_dict()) == BASE
