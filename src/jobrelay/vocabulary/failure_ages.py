"""How long ago a workload moved away from each worker after a worker-side failure there,
read from its record (``jobrelay.dev/worker-failures``, vocabulary/placement.py) with the
one clock (vocabulary/timestamps.py). Pure but for the time the caller passes: the
reconciler gives the seconds to the decision, which reads no clock."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobrelay.vocabulary.placement import worker_failures_of
from jobrelay.vocabulary.timestamps import parse_time

__all__ = ["worker_failure_ages"]


def worker_failure_ages(obj: Mapping[str, Any] | None, now: str) -> dict[str, float]:
    """Seconds from each recorded worker's latest move-away to ``now`` (RFC 3339); empty
    when nothing is recorded (most workloads: no clock is read)."""
    failures = worker_failures_of(obj)
    moment = parse_time(now) if failures else None
    if moment is None:
        return {}
    ages: dict[str, float] = {}
    for failure in failures:
        then = parse_time(failure.at)
        if then is not None:
            ages[failure.cluster] = (moment - then).total_seconds()  # the latest wins
    return ages
