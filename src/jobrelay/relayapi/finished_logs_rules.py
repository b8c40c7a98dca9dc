"""What a user asking for a finished workload's logs is told once its pods are gone: pure.

A finished workload's mirror, with its pods and their logs, stays on its worker for
``--finished-mirror-ttl`` (kinds/finished_mirrors.py); `jobrelay logs`, the log API
and the panel read it there meanwhile. Afterwards the API answers 404 with reason
``PodsRemoved`` and a sentence saying when it finished, when its pods went and which
setting keeps them longer, never that it waits for a worker. The controller serving
the API is the one that deleted the mirror: it knows its own setting, and the finish
time is on the management object (no write records the deletion).
"""

from __future__ import annotations

import datetime

from jobrelay.kinds.base import WorkloadKind
from jobrelay.kinds.finish_times import finished_at
from jobrelay.kinds.finished_mirrors import FinishedMirrorTtl, kept_for
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.placement import placements_of
from jobrelay.vocabulary.timestamps import rfc3339

__all__ = ["PODS_REMOVED", "no_pods_left", "pods_removed"]

# The reason of the API's answer (`jobrelay logs` exits 1 on it).
PODS_REMOVED = "PodsRemoved"


def pods_removed(
    kind: WorkloadKind,
    obj: JsonObj,
    ttl: FinishedMirrorTtl,
    *,
    now: datetime.datetime,
) -> str | None:
    """Why a finished workload with no mirror left has no logs to read (None: it has not
    finished, and the usual "not placed" answer stands)."""
    if kind.finish(obj) is None:
        return None
    who = _who(kind, obj)
    at = finished_at(kind, obj)
    finished = f"finished at {rfc3339(at)}" if at is not None else "finished"
    if not placements_of(obj):
        return f"{who} {finished} without running on a worker: it has no pod logs"
    kept = kept_for(kind, obj, ttl)
    own = kind.ttl_after_finished(obj)
    # The setting that ended the keeping: the object's own TTL when it was the shorter.
    shorter = own is not None and (ttl.forever or own < ttl.seconds)
    setting = (
        f"its own ttlSecondsAfterFinished: {own}"
        if shorter
        else f"{ttl.flag}; set it longer to keep logs longer"
    )
    if kept is None:
        return (
            f"{who} {finished}; its mirror was removed from its worker, not by jobrelay "
            f"({ttl.flag} keeps it): its pods' logs are gone"
        )
    if at is None:
        return f"{who} {finished}; its pods were removed from its worker ({setting})"
    try:
        removed = at + datetime.timedelta(seconds=kept)
    except OverflowError:  # a finish time near year 9999 (a status says what it likes)
        removed = datetime.datetime.max.replace(tzinfo=datetime.UTC)
    if removed > now:
        return (
            f"{who} {finished}; its mirror was removed from its worker before "
            f"{rfc3339(removed)}, when {ttl.flag} would have removed it: its pods' logs are gone"
        )
    return f"{who} {finished}; its pods were removed at {rfc3339(removed)} ({setting})"


def no_pods_left(kind: WorkloadKind, obj: JsonObj) -> str | None:
    """Why a finished workload whose mirror is still kept shows no pod (None: not finished,
    its pods may come yet)."""
    if kind.finish(obj) is None:
        return None
    at = finished_at(kind, obj)
    finished = f"finished at {rfc3339(at)}" if at is not None else "finished"
    return f"{_who(kind, obj)} {finished}; none of its pods is left on its worker"


def _who(kind: WorkloadKind, obj: JsonObj) -> str:
    metadata = obj.get("metadata") or {}
    return f"{kind.ref.kind} {metadata.get('namespace')}/{metadata.get('name')}"
