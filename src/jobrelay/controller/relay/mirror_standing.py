"""Which mirror of a workload jobrelay follows: the one it created and recorded. Pure.

What an object on a worker is to jobrelay is decided in one place for the relay and
the aggregated API alike (:mod:`jobrelay.kinds.followed`): only the mirror jobrelay
created and recorded is followed (or, once, the unrecorded one of the current run on
the worker it is placed on). A foreign mirror is never followed, never moves the
workload, and never deleted while its workload lives: it is reported.
"""

from __future__ import annotations

from jobrelay.controller.relay.snapshot import Snapshot, WorkerSnapshot
from jobrelay.kinds.followed import FOLLOWED_STANDINGS, MirrorStanding, mirror_standing
from jobrelay.placement.not_known import NotKnownYet
from jobrelay.vocabulary.json_types import JsonObj

__all__ = ["Standing", "excluded_for", "is_current", "standing"]

# What an object with the workload's name on one worker is to jobrelay.
Standing = MirrorStanding


def standing(s: Snapshot, obj: JsonObj, where: str, mirror: JsonObj) -> Standing:
    """What ``mirror``, seen on worker ``where``, is to the management object ``obj``.

    Until its record is written (steps/mirror_record.py), the mirror this process
    created there is named by the create's own answer (the relay's memory): that one
    is followed, any other object there claiming the run is foreign."""
    worker = s.worker(where)
    created = worker.unrecorded if worker is not None else None
    return mirror_standing(
        obj, where, mirror, controller_name=s.settings.controller_name, origin=s.settings.origin,
        created=None if created is None else (created.run, created.uid),
    )  # fmt: skip


def is_current(s: Snapshot, obj: JsonObj, where: str, mirror: JsonObj | None) -> bool:
    """Whether ``mirror`` on ``where`` is the one jobrelay follows for ``obj`` now."""
    return mirror is not None and standing(s, obj, where, mirror) in FOLLOWED_STANDINGS


def excluded_for(worker: WorkerSnapshot, namespace: str) -> str | None:
    """Why ``worker`` may not be given a workload of ``namespace`` now, whatever runs there
    (None: it may; a :class:`NotKnownYet` when that cannot be told yet).

    The one place a placement that does not go through placement's filters (a
    PlacementConflict recording where a mirror runs) asks: the cordon, the drain
    and the worker namespace's policy (placement/namespaces.py).
    """
    if worker.cordoned:
        return f"worker cluster {worker.name} is cordoned"
    if worker.drain:
        return f"worker cluster {worker.name} is being drained"
    closed = worker.namespaces.refusal(namespace) if worker.namespaces is not None else None
    if closed is not None and not isinstance(closed, NotKnownYet):
        return f"worker cluster {worker.name}: {closed}"
    return closed
