"""A mirror of a workload restored from a backup: made for the workload's old UID, and
named by the workload's own record, or by its placement. Pure.

A restore (Velero, or a saved manifest created again) gives a workload a new UID and
keeps jobrelay's annotations: where it runs, its run, and the UID of its mirror there.
To :mod:`jobrelay.kinds.followed` that mirror is an earlier object's (its
``jobrelay.dev/origin-uid`` names the old UID). What tells it from the mirror of a
namesake deleted and created again is the record: a new object never records the old
mirror's own UID, on that worker, as its current run's mirror; a restored copy of the
old object does.

A workload backed up before its mirror was recorded (younger than 30 s) has no record,
but it has its placement: ``jobrelay.dev/cluster`` with jobrelay's
``jobrelay.dev/placements`` history, which only the controller writes (the chart's
policy ``jobrelay-placement``). A namesake created again has none when created: it is
placed after the old mirror's deletion is asked for, so that mirror is going by then.
A placed workload whose current run's worker holds a mirror of that run, made for
another UID and not being deleted, is therefore a copy of the object that placed it.
"""

from __future__ import annotations

from jobrelay.kinds.mirrors import is_ours, origin_uid, run_of
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.meta import Meta
from jobrelay.vocabulary.names import PLACEMENTS_ANNOTATION
from jobrelay.vocabulary.placement import RecordedMirror, mirror_records, placements_of

__all__ = ["is_restored_mirror"]


def is_restored_mirror(
    obj: JsonObj,
    where: str,
    mirror: JsonObj,
    *,
    controller_name: str,
    origin: str,
    vouched: bool = False,
    going: bool = False,
) -> bool:
    """Whether ``mirror``, seen on worker ``where``, is the current run's mirror of the
    object ``obj`` is a restored copy of: ours, made for another UID, of ``obj``'s
    current run, and recorded by ``obj`` itself (its run, on ``where``, with the
    mirror's own UID), or, with no record of that run, on the worker ``obj`` is placed on.

    A mirror is recorded only once it has run a while (controller/relay/steps/
    mirror_record.py): a workload backed up younger has no record of it. Its placement
    then stands for the record: the mirror of its current run on the worker it is
    placed on, when jobrelay placed it (its placements history: a preset cluster alone
    says nothing) and that mirror is not being deleted (``going``, or its
    deletionTimestamp: a namesake's predecessor, deleted before the namesake is placed).
    ``vouched`` (an admin annotated the workload as restored) stands for it too, whoever
    placed it and whatever is under way."""
    if not is_ours(mirror, controller_name, origin):
        return False
    made_for, uid, mirror_uid = origin_uid(mirror), Meta(obj).uid, Meta(mirror).uid
    if not made_for or not uid or not mirror_uid or made_for == uid:
        return False
    history = placements_of(obj)
    run = len(history)
    if run == 0 or run_of(mirror) != run:
        return False
    record = mirror_records(obj).get(run)
    if record is not None:
        return record == RecordedMirror(where, mirror_uid)
    if where != history[-1]:
        return False
    if vouched:
        return True
    placed_by_jobrelay = Meta(obj).annotation(PLACEMENTS_ANNOTATION) is not None
    return placed_by_jobrelay and not going and not Meta(mirror).deleting
