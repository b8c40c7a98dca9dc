"""Sixth step: the mirror where the workload is placed. Pure.

Nothing is done on a worker that does not answer (until it is back or lost) or
whose cache has not listed. Then the object of its name there decides
(mirror_standing.py): the mirror jobrelay recorded is followed; the current
run's unrecorded one is recorded (adopted) once; a foreign one is left alone; an
earlier one goes before ours is created; a namesake sends the workload elsewhere;
none at all: the mirror is created (steps/mirror_creation.py). A followed mirror
takes the spec changes the kind copies (suspend, resume, pod templates the
manager's admission admits), and its copies of what its pods need follow the
manager's.
"""

from __future__ import annotations

from jobrelay.controller.relay.mirror_standing import Standing, standing
from jobrelay.controller.relay.plan import (
    Annotate,
    Done,
    Log,
    PatchMirror,
    ReadFresh,
    RecordEvent,
    RequeueAfter,
    Retry,
)
from jobrelay.controller.relay.refusal_wording import MIRROR_UPDATE_REJECTED
from jobrelay.controller.relay.snapshot import Snapshot
from jobrelay.controller.relay.steps.facts import meta, name, namespace, uid
from jobrelay.controller.relay.steps.holds import BEFORE_NEW_PODS, first_hold
from jobrelay.controller.relay.steps.mirror_creation import collision, copies, create
from jobrelay.controller.relay.steps.plan_parts import delete
from jobrelay.controller.relay.steps.step_types import Continue, Progress, StepAnswer, Stop
from jobrelay.kinds.mirrors import is_ours
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.merge_patch import apply_merge_patch
from jobrelay.vocabulary.placement import mirror_records, with_recorded_mirror


class MirrorStep:
    name = "mirror"

    def run(self, s: Snapshot, progress: Progress) -> StepAnswer:
        obj, cluster, worker = progress.obj, progress.cluster, progress.worker
        assert worker is not None  # only an unregistered worker is None, and that one is left
        if not worker.connected and worker.lost_in is not None:
            # Not answering: nothing to copy or create there until it is back (its return
            # brings the keys it holds back) or declared lost.
            wait = min(s.settings.unplaceable_retry, worker.lost_in)
            return progress.plan(RequeueAfter(max(1.0, wait)))
        if not worker.synced:
            return progress.plan(Retry(f"the mirror cache of {cluster} has not listed yet"))
        seen = worker.seen
        run = len(progress.history)
        found = None if seen is None else standing(s, obj, cluster, seen)
        if found is Standing.ADOPTABLE and seen is not None:
            # Unrecorded: placed before records were kept, or created just before a restart.
            # The apiserver's copy may hold the record the cache does not show yet.
            if not s.fresh:
                return progress.plan(ReadFresh(obj=True))
            # A step of its own: the record changes the object's version, which the writes
            # that follow would compare against (its watch event brings the key back).
            adopted = with_recorded_mirror(obj, run, cluster, str(meta(seen).get("uid")))
            progress.actions.append(Annotate({**adopted}))
            progress.actions.append(
                Log("info", f"recorded its mirror on {cluster} (run {run}) as its own")
            )
            return progress.plan(Done())
        created = worker.unrecorded
        if (
            found is Standing.FOLLOWED
            and seen is not None
            and created is not None
            and (created.run, created.uid) == (run, str(meta(seen).get("uid")))
            and run not in mirror_records(obj)
        ):
            record = with_recorded_mirror(obj, run, cluster, created.uid)
            progress.record = (Annotate({**record}), created.age)
        if found is Standing.FOREIGN:
            # Not ours to follow nor to delete (reported above): it holds the name there.
            return progress.plan(RequeueAfter(s.settings.unplaceable_retry))
        if found is not Standing.FOLLOWED and seen is not None:
            if is_ours(seen, s.settings.controller_name, s.settings.origin):
                # An earlier object of this name, or an earlier run of this one, left its
                # mirror: it goes before ours can be created (by the deletions step when
                # the cache shows it, else here).
                if worker.read_done and uid(seen) not in s.deleting | {uid(worker.mirror)}:
                    why = "it belongs to an earlier run or object"
                    progress.actions.append(delete(worker.name, seen, why))
                return progress.plan(Retry("an earlier mirror of this name is in the way"))
            return Stop(collision(s, obj, worker, progress.actions))
        if seen is None:
            placed_now = progress.placed_now
            return Stop(
                create(s, obj, worker, run, placed_now=placed_now, actions=progress.actions)
            )
        # While it runs, its copies follow the manager's objects: last in the plan, so
        # that a copy the worker refuses never holds up its status.
        progress.mirror = seen
        progress.sync = tuple(copies(s, worker))
        return _follow_spec(s, progress, seen)


def _follow_spec(s: Snapshot, progress: Progress, mirror: JsonObj) -> StepAnswer:
    """The spec changes the kind copies to a running mirror; a pod-template edit (a
    suspended mirror that never started takes one) is new pods: the manager's
    admission judges them first, and refused, the mirror keeps the pods it has."""
    obj, kind, cluster = progress.obj, s.kind, progress.cluster
    patch = kind.spec_patch(obj, mirror)
    if patch is None:
        return Continue()
    changes_pods = kind.pod_templates(apply_merge_patch(mirror, patch)) != kind.pod_templates(
        mirror
    )
    if changes_pods:
        hold = first_hold(BEFORE_NEW_PODS, s, obj)
        if hold is not None:
            return progress.held(hold, release=True)  # its mirror is visible
    progress.actions.append(
        PatchMirror(
            cluster, name(mirror), namespace(mirror), patch, if_refused=MIRROR_UPDATE_REJECTED
        )
    )
    if "suspend" in (patch.get("spec") or {}):
        verb = "Suspended" if kind.is_suspended(obj) else "Resumed"
        progress.actions.append(
            RecordEvent("Normal", verb, f"{verb} the mirror on worker cluster {cluster}")
        )
    return Continue()
