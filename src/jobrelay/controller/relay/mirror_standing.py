"""Which mirror of a workload jobrelay follows: the one it created and recorded. Pure.

A worker's objects say what the worker wants them to say: one that carries our
origin labels, the management object's UID and a higher ``jobrelay.dev/run`` is
not thereby our mirror. jobrelay records the UID of every mirror it creates on
the management object (``jobrelay.dev/mirrors``, vocabulary/placement.py) and
follows only that one. Objects placed before the record was kept, and a restart
between a create and its record, leave the current run's mirror unrecorded: the
one on the worker the workload is placed on, of the current run, is adopted
(recorded) once; an unrecorded one anywhere else, or of a later run, is foreign.
A foreign mirror is never followed, never moves the workload, and never deleted
while its workload lives: it is reported.
"""

from __future__ import annotations

from enum import Enum

from jobrelay.controller.relay.snapshot import Snapshot, WorkerSnapshot
from jobrelay.kinds.mirrors import is_ours, origin_uid, run_of
from jobrelay.kinds.types import JsonObj
from jobrelay.placement.namespaces import NOT_KNOWN as NAMESPACES_NOT_KNOWN
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.placement import RecordedMirror, mirror_records, placements_of


class Standing(Enum):
    """What an object with the workload's name on one worker is to jobrelay."""

    # Recorded as its run's mirror, on this worker, with this UID, of the current run (or
    # a later one: the placement annotations were edited back).
    FOLLOWED = "followed"
    # Of the current run, on the worker it is placed on, with no record of that run:
    # created before the record was kept, or just before a restart. Followed, and recorded.
    ADOPTABLE = "adoptable"
    # Of an earlier run: recorded there, or from before records (deleted as today).
    EARLIER = "earlier"
    # Carries this workload's marks but jobrelay did not create it (or not there).
    FOREIGN = "foreign"
    # Ours, of an earlier object of the same name.
    OTHER_OBJECT = "other-object"
    # Not labelled ours at all.
    NAMESAKE = "namesake"


def standing(s: Snapshot, obj: JsonObj, where: str, mirror: JsonObj) -> Standing:
    """What ``mirror``, seen on worker ``where``, is to the management object ``obj``.

    Until its record is written (steps/mirror_record.py), the mirror this process
    created there is named by the create's own answer (the relay's memory): that one
    is followed, any other object there claiming the run is foreign."""
    found = _recorded_standing(s, obj, where, mirror)
    worker = s.worker(where)
    created = worker.unrecorded if worker is not None else None
    if found is Standing.ADOPTABLE and created is not None and created.run == run_of(mirror):
        return Standing.FOLLOWED if created.uid == Meta(mirror).uid else Standing.FOREIGN
    return found


def _recorded_standing(s: Snapshot, obj: JsonObj, where: str, mirror: JsonObj) -> Standing:
    """What the object's records (and, without one, the adoption rule) say of ``mirror``."""
    if not is_ours(mirror, s.settings.controller_name, s.settings.origin):
        return Standing.NAMESAKE
    uid = Meta(obj).uid
    if not uid or origin_uid(mirror) != uid:
        return Standing.OTHER_OBJECT
    history = placements_of(obj)
    run, claimed = len(history), run_of(mirror)
    record = mirror_records(obj).get(claimed)
    if record is not None:
        if record != RecordedMirror(where, Meta(mirror).uid):
            return Standing.FOREIGN
        return Standing.EARLIER if claimed < run else Standing.FOLLOWED
    if claimed < run:
        return Standing.EARLIER
    if claimed == run and where == history[-1]:
        return Standing.ADOPTABLE
    return Standing.FOREIGN


def is_current(s: Snapshot, obj: JsonObj, where: str, mirror: JsonObj | None) -> bool:
    """Whether ``mirror`` on ``where`` is the one jobrelay follows for ``obj`` now."""
    return mirror is not None and standing(s, obj, where, mirror) in _CURRENT


_CURRENT = frozenset({Standing.FOLLOWED, Standing.ADOPTABLE})


def excluded_for(worker: WorkerSnapshot, namespace: str) -> str | None:
    """Why ``worker`` may not be given a workload of ``namespace`` now, whatever runs there
    (None: it may; ``NAMESPACES_NOT_KNOWN`` when that cannot be told yet).

    The one place a placement that does not go through placement's filters (a
    PlacementConflict recording where a mirror runs) asks: the cordon, the drain
    and the worker namespace's policy (placement/namespaces.py).
    """
    if worker.cordoned:
        return f"worker cluster {worker.name} is cordoned"
    if worker.drain:
        return f"worker cluster {worker.name} is being drained"
    closed = worker.namespaces.refusal(namespace) if worker.namespaces is not None else None
    if closed is not None and closed != NAMESPACES_NOT_KNOWN:
        return f"worker cluster {worker.name}: {closed}"
    return closed
