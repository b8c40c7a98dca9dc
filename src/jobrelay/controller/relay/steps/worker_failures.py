"""Moves after worker-side failures: the record of them on the management object, the
budget they count against, and the workers a workload avoids meanwhile. Pure.

A workload whose pods cannot run on their worker for the worker's fault
(kinds/pod_faults.py) moves elsewhere, its counters carried over; each such move is
recorded (``jobrelay.dev/worker-failures``: ``worker@time``, in the placement's own
write) and counts against ``jobrelay.dev/max-moves`` (else ``--max-moves``), never
against the workload's own retry limits. The worker it left is avoided for
``--failed-worker-avoid-for`` seconds.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from jobrelay.controller.relay.snapshot import Snapshot
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import annotations_of
from jobrelay.vocabulary.names import MAX_MOVES_ANNOTATION, WORKER_FAILURES_ANNOTATION

__all__ = [
    "FailedOn",
    "MovesAllowed",
    "avoided_workers",
    "moves_allowed",
    "recorded_failures",
    "with_failure",
]

# A record longer than this was not written by jobrelay (nor is a budget above it useful).
MAX_RECORDED = 100
_WORKER_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
# The one time format jobrelay writes (vocabulary/timestamps.py), read without a clock.
_TIME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})Z$")
AVOIDED = "the workload moved away from it after a worker-side failure"


class FailedOn(NamedTuple):
    """One move after a worker-side failure: the worker left, and when (RFC 3339)."""

    cluster: str
    at: str


def recorded_failures(obj: JsonObj) -> tuple[FailedOn, ...]:
    """The moves after worker-side failures recorded on ``obj``, oldest first (entries
    that are not jobrelay's shape are left out: the key is the controller's alone)."""
    text = annotations_of(obj).get(WORKER_FAILURES_ANNOTATION)
    if not isinstance(text, str) or not text:
        return ()
    found = []
    for entry in text.split(",")[:MAX_RECORDED]:
        cluster, _, at = entry.strip().partition("@")
        if _WORKER_NAME.match(cluster) and _epoch_seconds(at) is not None:
            found.append(FailedOn(cluster, at))
    return tuple(found)


def with_failure(obj: JsonObj, cluster: str, now: str) -> str:
    """The record once the move away from ``cluster`` at ``now`` is added."""
    entries = (*recorded_failures(obj), FailedOn(cluster, now))[-MAX_RECORDED:]
    return ",".join(f"{entry.cluster}@{entry.at}" for entry in entries)


class MovesAllowed(NamedTuple):
    """How many moves after worker-side failures the workload may make, and what the
    user is told about where that number comes from when its annotation is unusable."""

    limit: int
    note: str = ""


def moves_allowed(obj: JsonObj, default: int) -> MovesAllowed:
    """Its budget: ``jobrelay.dev/max-moves`` (0 to 100), else ``default``."""
    text = annotations_of(obj).get(MAX_MOVES_ANNOTATION)
    if text is None:
        return MovesAllowed(default)
    value = str(text).strip()
    if value.isdigit() and int(value) <= MAX_RECORDED:
        return MovesAllowed(int(value))
    shown = value[:20]
    return MovesAllowed(
        default,
        f"{MAX_MOVES_ANNOTATION} {shown!r} is not a number from 0 to {MAX_RECORDED}: "
        f"the default {default} applies",
    )


def avoided_workers(s: Snapshot, obj: JsonObj) -> dict[str, str]:
    """The workers ``obj`` moved away from after a worker-side failure less than
    ``--failed-worker-avoid-for`` ago: placement passes them over, saying why."""
    window = s.settings.failed_worker_avoid_for
    failures = recorded_failures(obj)
    if window <= 0 or not failures:
        return {}
    now = _epoch_seconds(s.now)
    if now is None:
        return {}
    avoided = {}
    for failure in failures:
        at = _epoch_seconds(failure.at)
        if at is not None and now - at < window:
            avoided[failure.cluster] = f"{AVOIDED} at {failure.at}"
    return avoided


def _epoch_seconds(text: str) -> int | None:
    """Seconds since 1970 of a ``YYYY-MM-DDTHH:MM:SSZ`` time (None for anything else):
    the civil-calendar day count, as the decision may not use a clock's library."""
    found = _TIME.match(text)
    if found is None:
        return None
    year, month, day, hour, minute, second = (int(part) for part in found.groups())
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 61):
        return None
    # Days from 1970-01-01 (Howard Hinnant's days_from_civil).
    year -= month <= 2
    era = year // 400
    of_era = year - era * 400
    of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    of_cycle = of_era * 365 + of_era // 4 - of_era // 100 + of_year
    days = era * 146097 + of_cycle - 719468
    return ((days * 24 + hour) * 60 + minute) * 60 + second
