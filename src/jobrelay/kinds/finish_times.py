"""When a workload finished, as a time: its kind's finish time read once, the same way
for the relay (how long its mirror is still kept) and the aggregated API (when its
pods went). Pure but for the clock the caller passes."""

from __future__ import annotations

import datetime

from jobrelay.kinds.base import WorkloadKind
from jobrelay.kinds.finished_mirrors import FinishedMirrorTtl, kept_for, time_left
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.timestamps import parse_time

__all__ = ["finished_at", "finished_for", "mirror_still_kept"]


def finished_at(kind: WorkloadKind, obj: JsonObj | None) -> datetime.datetime | None:
    """When ``obj`` finished, by the time its status gives (None: not finished, or no
    time given)."""
    finish = kind.finish(obj) if obj is not None else None
    return parse_time(finish.at) if finish is not None and finish.at else None


def finished_for(kind: WorkloadKind, obj: JsonObj | None, now: str) -> float | None:
    """Seconds from when ``obj`` finished to ``now`` (RFC 3339); None as :func:`finished_at`."""
    then = finished_at(kind, obj)
    if then is None:  # most snapshots: no clock to read
        return None
    moment = parse_time(now)
    if moment is None:
        return None
    return (moment - then).total_seconds()


def mirror_still_kept(kind: WorkloadKind, obj: JsonObj, ttl: FinishedMirrorTtl, now: str) -> bool:
    """Whether ``obj`` finished and its mirror is still kept at ``now`` (its deletion at
    the deadline already waits in the queue), not being deleted."""
    if (obj.get("metadata") or {}).get("deletionTimestamp") or not kind.is_finished(obj):
        return False
    left = time_left(kept_for(kind, obj, ttl), finished_for(kind, obj, now))
    return left is None or left > 0
