"""Moves after worker-side failures: the budget they count against, and the workers a
workload avoids meanwhile. Pure.

A workload whose pods cannot run on their worker for the worker's fault
(kinds/pod_faults.py) moves elsewhere, its counters carried over; each such move is
recorded in the placement's own write (``jobrelay.dev/worker-failures``, read and
written by vocabulary/placement.py) and counts against ``jobrelay.dev/max-moves`` (else
``--max-moves``), never against the workload's own retry limits. The worker it left is
avoided for ``--failed-worker-avoid-for`` seconds (the snapshot's ``failure_ages``).
"""

from __future__ import annotations

from typing import NamedTuple

from jobrelay.controller.relay.snapshot import Snapshot
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import annotation_of
from jobrelay.vocabulary.names import MAX_MOVES_ANNOTATION
from jobrelay.vocabulary.placement import MAX_RECORDED_FAILURES, worker_failures_of

__all__ = ["MovesAllowed", "avoided_workers", "budget_spent", "moves_allowed"]

AVOIDED = "the workload moved away from it after a worker-side failure"


class MovesAllowed(NamedTuple):
    """How many moves after worker-side failures the workload may make, and what the
    user is told about where that number comes from when its annotation is unusable."""

    limit: int
    note: str = ""


def moves_allowed(obj: JsonObj, default: int) -> MovesAllowed:
    """Its budget: ``jobrelay.dev/max-moves`` (0 to 100), else ``default``."""
    text = annotation_of(obj, MAX_MOVES_ANNOTATION)
    if text is None:
        return MovesAllowed(default)
    value = text.strip()
    # Bounded before it is a number: a tenant's annotation may be any length.
    if len(value) <= 3 and value.isdigit() and int(value) <= MAX_RECORDED_FAILURES:
        return MovesAllowed(int(value))
    return MovesAllowed(
        default,
        f"{MAX_MOVES_ANNOTATION} {value[:20]!r} is not a number from 0 to "
        f"{MAX_RECORDED_FAILURES}: the default {default} applies",
    )


def budget_spent(s: Snapshot, obj: JsonObj) -> bool:
    """Whether it has made every move after worker-side failures it may make."""
    return len(worker_failures_of(obj)) >= moves_allowed(obj, s.settings.max_moves).limit


def avoided_workers(s: Snapshot) -> dict[str, str]:
    """The workers the workload moved away from after a worker-side failure less than
    ``--failed-worker-avoid-for`` ago: placement passes them over, saying why."""
    window = s.settings.failed_worker_avoid_for
    return {
        cluster: f"{AVOIDED} {int(age)}s ago"
        for cluster, age in s.failure_ages.items()
        if age < window
    }
