"""The fair-share benchmark's arithmetic (pure): each queue's share of the running CPU
over the saturated period, from samples taken once a second.

The saturated period is what fair share is about: every queue still has work waiting,
so each takes what the admission order gives it, not what it happens to ask. It starts
once the fleet is first (nearly) full, so the ramp-up from an empty fleet is not counted,
and ends at the first sample where some queue has nothing left to wait.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TOLERANCE_PP = 5.0  # issue 24: each queue within +-5 percentage points of its target
FULL_FRACTION = 0.9  # the fleet counts as full from this much of its CPU running


@dataclass(frozen=True)
class Sample:
    """One moment: seconds since the first create, CPUs running and Jobs waiting per queue."""

    at: float
    running: Mapping[str, float]
    pending: Mapping[str, int]

    @property
    def total(self) -> float:
        return sum(self.running.values())


@dataclass(frozen=True)
class ShareSummary:
    """Each queue's share of the running CPU over the saturated window, against its target."""

    start: float | None  # the window's first and last sample (None: no saturated sample)
    end: float | None
    samples: int
    utilization: float  # mean running CPU over the window / the fleet's CPU
    shares: dict[str, float]  # fractions, summing to 1 (CPU-seconds of the queue / of all)
    targets: dict[str, float]
    deviation_pp: dict[str, float]  # share - target, percentage points
    max_deviation_pp: float
    passed: bool


def targets(weights: Mapping[str, float]) -> dict[str, float]:
    """Each queue's fair share when all of them have more work than the fleet holds."""
    total = sum(weights.values())
    return {queue: weight / total for queue, weight in weights.items()}


def saturated(samples: Sequence[Sample], capacity: float) -> list[Sample]:
    """The samples from the first one where the fleet is nearly full, up to (without) the
    first one after it where some queue has no pending work."""
    window: list[Sample] = []
    for sample in samples:
        if not window and sample.total < FULL_FRACTION * capacity:
            if any(count <= 0 for count in sample.pending.values()):
                return []  # a queue ran dry before the fleet ever filled
            continue
        if any(sample.pending.get(queue, 0) <= 0 for queue in sample.running):
            break
        window.append(sample)
    return window


def summarize(
    samples: Sequence[Sample],
    weights: Mapping[str, float],
    capacity: float,
    tolerance_pp: float = TOLERANCE_PP,
) -> ShareSummary:
    """Shares as CPU-seconds over the saturated window (samples are evenly spaced, so a
    sum is a time integral); PASS when every queue is within ``tolerance_pp``."""
    wanted = targets(weights)
    window = saturated(
        [Sample(s.at, {q: s.running.get(q, 0.0) for q in weights}, s.pending) for s in samples],
        capacity,
    )
    used = {queue: sum(s.running[queue] for s in window) for queue in weights}
    total = sum(used.values())
    if not window or total <= 0:
        return ShareSummary(None, None, 0, 0.0, {}, wanted, {}, float("inf"), False)
    shares = {queue: used[queue] / total for queue in weights}
    deviation = {queue: 100.0 * (shares[queue] - wanted[queue]) for queue in weights}
    worst = max(abs(d) for d in deviation.values())
    return ShareSummary(
        start=window[0].at,
        end=window[-1].at,
        samples=len(window),
        utilization=total / len(window) / capacity if capacity > 0 else 0.0,
        shares=shares,
        targets=wanted,
        deviation_pp=deviation,
        max_deviation_pp=worst,
        passed=worst <= tolerance_pp,
    )


def share_series(samples: Sequence[Sample], queues: Sequence[str]) -> dict[str, list[float]]:
    """Each queue's share of the CPU running at each sample (0 where nothing runs)."""
    series: dict[str, list[float]] = {queue: [] for queue in queues}
    for sample in samples:
        total = sum(sample.running.get(queue, 0.0) for queue in queues)
        for queue in queues:
            series[queue].append(sample.running.get(queue, 0.0) / total if total > 0 else 0.0)
    return series


def every(samples: Sequence[Sample], seconds: float) -> list[Sample]:
    """One sample per ``seconds`` (the first at or after each step): the printed table."""
    picked: list[Sample] = []
    next_at = float("-inf")
    for sample in samples:
        if sample.at >= next_at:
            picked.append(sample)
            next_at = sample.at + seconds
    return picked
