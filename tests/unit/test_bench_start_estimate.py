"""`python -m bench estimate`'s replay (pure): a small trace plays to its end, and an
estimate is judged right within 25 % of the real wait or 5 s."""

from __future__ import annotations

import math

from bench.start_estimate_replay import Outcome, replay, trace, within


def test_a_small_trace_plays_out_and_most_estimates_are_right() -> None:
    jobs = trace(80, 7)
    outcomes = replay(jobs)
    assert all(job.admitted is not None for job in jobs)  # every Job ran
    assert all(not math.isnan(o.real) and o.real >= o.asked for o in outcomes)
    assert sum(within(o) for o in outcomes) >= 0.7 * len(outcomes)


def test_within() -> None:
    assert within(Outcome(0.0, 110.0, 100.0))
    assert not within(Outcome(0.0, 130.0, 100.0))
    assert within(Outcome(0.0, 4.0, 0.0))  # a short wait: 5 s either way
    assert not within(Outcome(0.0, None, 10.0))
