"""Which mirror of a workload jobrelay follows: the one it created and recorded. Pure.

A worker's objects say what the worker wants them to say: one that carries our
origin labels, the management object's UID and a higher ``jobrelay.dev/run`` is
not thereby our mirror. jobrelay records the UID of every mirror it creates on
the management object (``jobrelay.dev/mirrors``, vocabulary/placement.py) and
follows only that one. Objects placed before the record was kept, and a restart
between a create and its record, leave the current run's mirror unrecorded: the
one on the worker the workload is placed on, of the current run, is adopted
(recorded) once; an unrecorded one anywhere else, or of a later run, is foreign.

The relay (controller/relay/mirror_standing.py) and the aggregated API (which
mirror's pods and logs a user reads) both ask here, so they never disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import Enum

from jobrelay.kinds.mirrors import is_ours, origin_uid, run_of
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import uid_of
from jobrelay.vocabulary.placement import RecordedMirror, mirror_records, placements_of

__all__ = ["FOLLOWED_STANDINGS", "MirrorStanding", "followed_mirror", "mirror_standing"]


class MirrorStanding(Enum):
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


FOLLOWED_STANDINGS = frozenset({MirrorStanding.FOLLOWED, MirrorStanding.ADOPTABLE})


def mirror_standing(
    obj: JsonObj,
    where: str,
    mirror: JsonObj,
    *,
    controller_name: str,
    origin: str,
    created: tuple[int, str] | None = None,
) -> MirrorStanding:
    """What ``mirror``, seen on worker ``where``, is to the management object ``obj``.

    ``created``: the (run, UID) of the mirror this process created on ``where`` and has
    not recorded yet (controller/relay/steps/mirror_record.py): until the record is
    written, the create's own answer names the mirror of that run there."""
    if not is_ours(mirror, controller_name, origin):
        return MirrorStanding.NAMESAKE
    uid = uid_of(obj)
    if not uid or origin_uid(mirror) != uid:
        return MirrorStanding.OTHER_OBJECT
    history = placements_of(obj)
    run, claimed = len(history), run_of(mirror)
    record = mirror_records(obj).get(claimed)
    if record is not None:
        if record != RecordedMirror(where, uid_of(mirror)):
            return MirrorStanding.FOREIGN
        return MirrorStanding.EARLIER if claimed < run else MirrorStanding.FOLLOWED
    if claimed < run:
        return MirrorStanding.EARLIER
    if claimed == run and where == history[-1]:
        if created is not None and created[0] == claimed:
            same = created[1] == uid_of(mirror)
            return MirrorStanding.FOLLOWED if same else MirrorStanding.FOREIGN
        return MirrorStanding.ADOPTABLE
    return MirrorStanding.FOREIGN


def followed_mirror(
    obj: JsonObj,
    cached: Iterable[tuple[str, JsonObj | None]],
    *,
    controller_name: str,
    origin: str,
    created: Callable[[str], tuple[int, str] | None] = lambda _worker: None,
) -> tuple[str, JsonObj] | None:
    """The worker and mirror jobrelay follows for ``obj`` among ``cached`` ((worker,
    cached mirror) pairs), or None: the recorded one (or the one to adopt), never merely
    the highest run a worker shows. ``created(worker)``: as :func:`mirror_standing`'s.
    Should hand edits leave two, the one on the worker ``obj`` is placed on wins, then
    the later run."""
    history = placements_of(obj)
    placed = history[-1] if history else ""
    followed = [
        (worker == placed, run_of(mirror), worker, mirror)
        for worker, mirror in cached
        if mirror is not None
        and mirror_standing(
            obj,
            worker,
            mirror,
            controller_name=controller_name,
            origin=origin,
            created=created(worker),
        )
        in FOLLOWED_STANDINGS
    ]
    if not followed:
        return None
    _, _, worker, mirror = max(followed, key=lambda found: found[:3])
    return worker, mirror
