"""First step: the mirrors that go. Pure.

A workload that is gone (or being deleted) takes all its mirrors with it, and one
that finished needs them no more: the one that finished it is kept, with its pods
and their logs, until ``--finished-mirror-ttl`` after the finish time its status
gives (kinds/finished_mirrors.py), and looked at again then. Either ends the
decision. Otherwise every mirror of an earlier object of its name, or of an
earlier run on a worker it left, is deleted, and the decision goes on. Its
ProvisioningRequests go likewise: all with the workload, those of an earlier object
of its name, and those on workers other than the one it is placed on.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from jobrelay.controller.relay.mirror_standing import Standing, standing
from jobrelay.controller.relay.plan import DeleteMirror, Done, RequeueAfter
from jobrelay.controller.relay.snapshot import Snapshot
from jobrelay.controller.relay.steps.claiming_capacity import requests_going
from jobrelay.controller.relay.steps.facts import meta, uid
from jobrelay.controller.relay.steps.plan_parts import delete
from jobrelay.controller.relay.steps.step_types import Continue, Progress, StepAnswer
from jobrelay.kinds.finished_mirrors import kept_for, time_left
from jobrelay.kinds.mirrors import origin_uid
from jobrelay.vocabulary.outcome import Lane


@dataclass(frozen=True, slots=True)
class Keep:
    """A deletion pass spares the mirror followed (only a finished one, with
    ``finished_only``); foreign ones are never deleted while the object lives."""

    finished_only: bool = False


class DeletionStep:
    name = "deletions"

    def run(self, s: Snapshot, progress: Progress) -> StepAnswer:
        obj = s.obj
        if obj is None or meta(obj).get("deletionTimestamp"):
            progress.actions.extend(deletions(s, keep=None))
            progress.actions.extend(requests_going(s, obj))
            return progress.plan(Done(), release=True)
        if s.kind.is_finished(obj):
            # The final status is on the management object: the mirror has served its
            # purpose, but for its pods' logs (the finished run's own is kept a while).
            left = time_left(kept_for(s.kind, obj, s.settings.finished_mirrors), s.finished_for)
            keep = Keep(finished_only=True) if left is None or left > 0 else None
            going = list(deletions(s, keep=keep))
            progress.actions.extend(going)
            progress.actions.extend(requests_going(s, obj))
            kept = left is not None and left > 0 and _spares_one(s, going)
            # Time, not an event, ends the keeping: one look then, not a poll.
            outcome = RequeueAfter(left, Lane.BACKGROUND) if kept and left else Done()
            return progress.plan(outcome, release=True)
        progress.actions.extend(deletions(s, keep=Keep()))
        progress.actions.extend(requests_going(s, obj))
        return Continue()


def _spares_one(s: Snapshot, going: list[DeleteMirror]) -> bool:
    """Whether a cached mirror of this key stays after ``going`` (one kept, to delete later)."""
    deleted = {action.uid for action in going} | s.deleting
    return any(
        w.mirror is not None
        and not meta(w.mirror).get("deletionTimestamp")
        and str(meta(w.mirror).get("uid")) not in deleted
        for w in s.workers
    )


def deletions(s: Snapshot, *, keep: Keep | None) -> Iterator[DeleteMirror]:
    """Delete every cached mirror of this key but the kept ones (and those already going).

    Workers that do not answer are skipped: their mirrors are deleted when they
    answer again (their return brings every key they hold back).
    """
    obj = s.obj
    for worker in s.workers:
        mirror = worker.mirror
        if mirror is None or meta(mirror).get("deletionTimestamp") or not worker.connected:
            continue
        if str(meta(mirror).get("uid")) in s.deleting:
            continue
        if obj is None or meta(obj).get("deletionTimestamp"):
            why = f"its management {s.kind.ref.kind} is gone"
        elif origin_uid(mirror) != uid(obj):
            why = "it belongs to an earlier object of this name"
        else:
            found = standing(s, obj, worker.name, mirror)
            if found is Standing.FOREIGN:
                continue
            if (
                found in (Standing.FOLLOWED, Standing.ADOPTABLE)
                and keep is not None
                and (not keep.finished_only or s.kind.is_finished(mirror))
            ):
                continue
            if s.kind.is_finished(obj):
                why = f"its {s.kind.ref.kind} has finished"
            else:
                why = "it belongs to an earlier run, on a worker the workload has left"
        yield delete(worker.name, mirror, why)
