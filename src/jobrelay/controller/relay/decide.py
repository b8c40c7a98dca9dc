"""The decision: what one management object and its mirrors need next. Pure.

``decide(snapshot) -> Plan``: no I/O, no clock (the time is in the snapshot),
no state. Every rule that keeps a workload's promise is here, where a table
test reaches it in microseconds:

- a workload is placed once, by a compare-and-swap of its placement
  annotation written *before* its mirror exists;
- it never has two live mirrors: a mirror is created only where it is placed,
  only when no live mirror of it exists anywhere (one that does is followed,
  wherever the annotation points), and only after a fresh read shows it
  unfinished (a lagging cache must not resurrect a finished one);
- a namesake on a worker that jobrelay did not create is never touched, and a
  mirror jobrelay did not create is never followed (mirror_standing.py);
- the management status follows the mirror's and is never written when the
  kind's rules would refuse it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from jobrelay.admission.preemption_rules import PREEMPTED
from jobrelay.controller.relay.mirror_standing import Standing, excluded_for, is_current, standing
from jobrelay.controller.relay.plan import (
    Action,
    Annotate,
    CopyDependencies,
    CreateMirror,
    DeleteMirror,
    Done,
    Log,
    PatchMirror,
    Place,
    Plan,
    ReadFresh,
    RecordEvent,
    RequeueAfter,
    Retry,
    Terminal,
    WriteStatus,
)
from jobrelay.controller.relay.snapshot import Snapshot, WorkerSnapshot, placement_cluster
from jobrelay.kinds.base import Finish
from jobrelay.kinds.dependency_copies import owner_reference, refusal
from jobrelay.kinds.mirrors import is_ours, origin_uid, run_of
from jobrelay.kinds.patches import apply_merge_patch, merge_patch
from jobrelay.kinds.types import JsonObj
from jobrelay.placement.claims import NOT_KNOWN as CLAIMS_NOT_KNOWN
from jobrelay.placement.decision import Decision, place
from jobrelay.placement.model import NOT_KNOWN, Cluster
from jobrelay.placement.namespaces import NOT_KNOWN as NAMESPACES_NOT_KNOWN
from jobrelay.placement.workload import Invalid, PodGroup, read_workload
from jobrelay.vocabulary.names import (
    CLUSTER_ANNOTATION,
    NOT_PLACED_ANNOTATION,
    PLACEMENTS_ANNOTATION,
    PREEMPTED_BY_ANNOTATION,
    REDISPATCH_ALWAYS,
    REDISPATCH_ANNOTATION,
    REDISPATCH_NEVER,
)
from jobrelay.vocabulary.placement import (
    mirror_records,
    placement_of,
    placements_of,
    with_placement,
    with_recorded_mirror,
    without_records_from,
)
from jobrelay.vocabulary.workercluster import DrainMode


def _meta(obj: JsonObj) -> dict[str, Any]:
    meta: dict[str, Any] = obj.get("metadata") or {}
    return meta


def _annotations(obj: JsonObj) -> dict[str, Any]:
    annotations: dict[str, Any] = _meta(obj).get("annotations") or {}
    return annotations


def decide(s: Snapshot) -> Plan:
    obj = s.obj
    if obj is None or _meta(obj).get("deletionTimestamp"):
        return Plan(tuple(_deletions(s, keep=None)), Done(), release=True)
    kind = s.kind
    if kind.is_finished(obj):
        # The final status is on the management object: the mirror has served its purpose
        # (kept on request if it is the finished run's own).
        keep = _Keep(finished_only=True) if s.settings.keep_finished_mirrors else None
        return Plan(tuple(_deletions(s, keep=keep)), Done(), release=True)
    history = placements_of(obj)
    actions: list[Action] = list(_deletions(s, keep=_Keep()))
    if not s.fresh and _any_foreign(s, obj):
        # The management object's cache may lag our own writes (the placement and the
        # record of a mirror just created): only a fresh read makes a mirror foreign.
        return Plan(tuple(actions), ReadFresh(obj=True))
    actions.extend(_foreign_reports(s, obj))

    cluster = placement_of(obj)
    # A fresh read of a worker, when there is one, is truer than its cache.
    live = [w for w in s.workers if _live_mirror_of(w.seen, obj, s, w.name)]
    if history and live and all(w.name != history[-1] for w in live):
        # Its recorded mirror runs on a worker its placements do not end with (hand
        # edits of both annotations): a mirror where they point would run it twice.
        # The one that runs stays the one followed, and the user is told; unless that
        # worker is one the workload may not be given: then it is stopped there first.
        elsewhere = live[0].name
        excluded = excluded_for(live[0], _namespace(obj))
        if excluded == NAMESPACES_NOT_KNOWN:
            return Plan(tuple(actions), Retry(f"the namespaces of {elsewhere} are not known yet"))
        if excluded is not None:
            return _stop_excluded(live[0], history, excluded, actions)
        message = (
            f"placed on worker cluster {history[-1]} (annotations {CLUSTER_ANNOTATION}, "
            f"{PLACEMENTS_ANNOTATION}) while its mirror runs on {elsewhere}; jobrelay does not "
            f"move a running workload behind its own back and keeps following the mirror on "
            f"{elsewhere}, and records it as the placement"
        )
        actions.extend(_warning("PlacementConflict", message))
        fixed = (*history[:-1], elsewhere)
        actions.append(Place(elsewhere, _version(obj), fixed))
        return Plan(tuple(actions), Done())
    going = _followed_going_elsewhere(s, obj, history)
    if going is not None:
        return Plan(tuple(actions), Retry(f"waiting for its mirror on {going} to be gone"))
    requeued = _requeued(obj, cluster, history)
    if history and cluster != history[-1] and not requeued:
        # The placement annotation belongs to jobrelay: an edit would move the workload
        # while its mirror may run, so it is undone.
        message = (
            f"the annotation {CLUSTER_ANNOTATION} is set by jobrelay and was changed to "
            f"{cluster or '(nothing)'}: set back to {history[-1]}. To move a workload, drain "
            f"its worker (jobrelay clusters drain {history[-1]}), or delete and re-create it"
        )
        actions.extend(_warning("PlacementRestored", message))
        actions.append(Place(history[-1], _version(obj), history))
        return Plan(tuple(actions), Done())

    placed_now = False
    demand: tuple[PodGroup, ...] = ()
    if not cluster:
        if kind.is_suspended(obj):
            # Created suspended: nothing runs anywhere until it is resumed.
            write = _status_write(s, obj, None)
            if isinstance(write, Terminal):
                return Plan(tuple(actions), write)
            return Plan(tuple(actions) + ((write,) if write else ()), Done())
        if live:
            cluster = live[0].name  # its placement annotations were lost: keep the mirror it has
        else:
            held = _held_by_queue(s, obj, actions)
            if held is None:
                held = _held_by_dependencies(s, obj, actions)
            if held is None:
                held = _held_by_admission(s, actions)
            if held is not None:
                return held
            placed = _placement(s, obj, _foreign_holders(s), actions)
            if isinstance(placed, Plan):
                return placed
            if isinstance(placed, _Unplaceable):
                return _not_placed(s, obj, placed, actions)
            cluster, demand = placed.cluster, placed.demand
        if not requeued:
            history = (cluster,)
        elif not live:
            # Preempted, it runs again where admitted, as a new run after those it had.
            history = (*history, cluster)
        actions.append(Place(cluster, _version(obj), history, demand))
        obj = with_placement(obj, cluster, history)
        placed_now = True

    worker = s.worker(cluster)
    if s.preempt is not None and not placed_now and not _preempted_by(obj):
        # The mark first, restart-safe: from here its run ends and it waits in its queue.
        actions.append(Annotate({PREEMPTED_BY_ANNOTATION: s.preempt.by}))
        actions.extend(_warning(PREEMPTED, s.preempt.message))
        return Plan(tuple(actions), Done())  # the mark's watch event brings it back
    leaving = _why_leave(s, obj, worker, cluster)
    if leaving is not None:
        return _move(s, obj, worker, cluster, history, leaving, actions)
    assert worker is not None  # only an unregistered worker is None, and that one is left
    if not worker.connected and worker.lost_in is not None:
        # Not answering: nothing to copy or create there until it is back (its return
        # brings the keys it holds back) or declared lost.
        wait = min(s.settings.unplaceable_retry, worker.lost_in)
        return Plan(tuple(actions), RequeueAfter(max(1.0, wait)))
    if not worker.synced:
        return Plan(tuple(actions), Retry(f"the mirror cache of {cluster} has not listed yet"))

    seen = worker.seen
    mirror: JsonObj | None = None
    run = len(history)
    found = None if seen is None else standing(s, obj, cluster, seen)
    if found is Standing.ADOPTABLE and seen is not None:
        # Unrecorded: placed before records were kept, or created just before a restart.
        # The apiserver's copy may hold the record the cache does not show yet.
        if not s.fresh:
            return Plan(tuple(actions), ReadFresh(obj=True))
        # A step of its own: the record changes the object's version, which the writes
        # that follow would compare against (its watch event brings the key back).
        adopted = with_recorded_mirror(obj, run, cluster, str(_meta(seen).get("uid")))
        actions.append(Annotate({**adopted}))
        actions.append(Log("info", f"recorded its mirror on {cluster} (run {run}) as its own"))
        return Plan(tuple(actions), Done())
    elif found is Standing.FOLLOWED:
        mirror = seen
    elif found is Standing.FOREIGN:
        # Not ours to follow nor to delete (reported above): it holds the name there.
        return Plan(tuple(actions), RequeueAfter(s.settings.unplaceable_retry))
    elif seen is not None and is_ours(seen, s.settings.controller_name, s.settings.origin):
        # An earlier object of this name, or an earlier run of this one, left its mirror:
        # it goes before ours can be created (by the deletions above when the cache
        # shows it, else here).
        if worker.read_done and _uid(seen) not in s.deleting | {_uid(worker.mirror)}:
            actions.append(_delete(worker.name, seen, "it belongs to an earlier run or object"))
        return Plan(tuple(actions), Retry("an earlier mirror of this name is in the way"))
    elif seen is not None:
        return _collision(s, obj, worker, actions)

    if mirror is None:
        return _create(s, obj, worker, run, placed_now=placed_now, actions=actions)
    # While it runs, its copies follow the manager's objects and are owned by it: last in
    # the plan, so that a copy the worker refuses never holds up its status.
    sync = tuple(_copies(s, worker, owner=mirror))

    patch = kind.spec_patch(obj, mirror)
    if patch is not None and _changes_pods(s, mirror, patch):
        # A pod-template edit (a suspended mirror that never started takes one) is new
        # pods: the manager's admission judges them first; refused, the mirror keeps
        # the pods it has.
        held = _held_by_admission(s, actions)
        if held is not None:
            return dataclasses.replace(held, release=True)  # its mirror is visible
    if patch is not None:
        actions.append(PatchMirror(cluster, _name(mirror), _namespace(mirror), patch))
        if "suspend" in (patch.get("spec") or {}):
            verb = "Suspended" if kind.is_suspended(obj) else "Resumed"
            actions.append(
                RecordEvent("Normal", verb, f"{verb} the mirror on worker cluster {cluster}")
            )
    write = _status_write(s, obj, mirror)
    if isinstance(write, Terminal):
        return Plan(tuple(actions), write, release=True)
    batch_wait = _batch_wait(s, obj, write)
    if batch_wait is not None:
        return Plan((*actions, *sync), RequeueAfter(batch_wait), release=True, batching=True)
    if write is not None:
        actions.append(write)
        finish = kind.finish({**obj, "status": write.status})
        if finish is not None:
            actions.append(_finish_event(finish, cluster))
            if not s.settings.keep_finished_mirrors:
                actions.append(_delete(cluster, mirror, f"its {kind.ref.kind} has finished"))
            return Plan(tuple(actions), Done(), release=True)
    return Plan((*actions, *sync), _until_pending_timeout(s, worker), release=True)


def _until_pending_timeout(s: Snapshot, worker: WorkerSnapshot) -> Done | RequeueAfter:
    """Look again when the pending timeout of its unschedulable pods runs out (no watch
    event says that time has passed)."""
    timeout, waited = s.settings.pending_timeout, worker.unschedulable_for
    if timeout <= 0 or waited is None:
        return Done()
    return RequeueAfter(max(1.0, timeout - waited) if waited < timeout else timeout)


def _create(
    s: Snapshot,
    obj: JsonObj,
    worker: WorkerSnapshot,
    run: int,
    *,
    placed_now: bool,
    actions: list[Action],
) -> Plan:
    """No mirror of this run is on its worker: create it, after what a lost one did counts."""
    kind, cluster = s.kind, worker.name
    if worker.create_pending:
        return Plan(tuple(actions), Done())  # its watch event will bring the key back
    if not placed_now and not s.fresh:
        # The caches may lag our own writes: a mirror deleted after its final
        # status was copied must not come back because the cached object does
        # not show that status yet. Only the apiserver's copy can tell.
        return Plan(tuple(actions), ReadFresh(obj=True))
    # Whoever set the placement (a user may preset or edit the annotations where no
    # admission policy stops them), a mirror is created only for pods the manager
    # admits, with what they need there, and never on a worker that takes no new mirrors.
    held = _held_by_dependencies(s, obj, actions)
    if held is None:
        held = _held_by_admission(s, actions)
    if held is not None:
        return held
    if worker.cordoned and not placed_now:
        leave = _Leave(f"worker cluster {cluster} is cordoned: it takes no new mirrors", lost=False)
        return _move(s, obj, worker, cluster, placements_of(obj), leave, actions)
    closed = worker.namespaces.refusal(_namespace(obj)) if worker.namespaces else None
    if closed == NAMESPACES_NOT_KNOWN:
        return Plan(tuple(actions), Retry(f"the namespaces of {cluster} have not listed yet"))
    if closed is not None and not placed_now:
        # Placed by hand there, or the namespace changed hands since: never into it.
        leave = _Leave(f"worker cluster {cluster}: {closed}", lost=False)
        return _move(s, obj, worker, cluster, placements_of(obj), leave, actions)
    if worker.foreign_dependencies:
        return _foreign_dependencies(s, obj, worker, actions)
    vanished = _vanished_mirror(s, obj, worker)
    # Pods shown running while no mirror exists: this run's mirror went without a trace.
    was_running = kind.has_run(obj) and kind.shows_running(obj)
    ended = _end_of_run(s, obj, vanished, cluster, actions)
    if isinstance(ended, Plan):
        return ended
    if ended is not None:
        if vanished is not None:
            return Plan(tuple(actions), Done())  # create from the status just written
        obj = {**obj, "status": ended.status}
    if not placed_now and (vanished is not None or was_running):
        message = (
            f"the mirror on worker cluster {cluster} was deleted outside jobrelay: running "
            f"again there, with what earlier runs did carried over"
        )
        actions.extend(_warning("MirrorVanished", message))
    body = kind.build_mirror(
        obj, controller_name=s.settings.controller_name, origin=s.settings.origin,
        run=run, now=s.now,
    )  # fmt: skip
    if any(recorded >= run for recorded in mirror_records(obj)):
        # This run's record names a mirror that is gone: it goes before another is
        # created, so that a restart between the create and its record adopts the new one.
        actions.append(Annotate(without_records_from(obj, run)))
    # Its ConfigMaps, Secrets and ServiceAccount first: its pods need them at once.
    actions.extend(_copies(s, worker, owner=None))
    actions.append(CreateMirror(cluster, body, _uid(obj) or "", run))
    actions.append(RecordEvent("Normal", "Dispatched", f"Dispatched to worker cluster {cluster}"))
    return Plan(tuple(actions), Done())


def _end_of_run(
    s: Snapshot, obj: JsonObj, vanished: JsonObj | None, cluster: str, actions: list[Action]
) -> Plan | WriteStatus | None:
    """The status once a run ended without finishing, before another starts.

    Nothing of it runs now; what a gone mirror did (its last state) counts; and
    if earlier runs already decided the outcome, the workload ends here instead
    of running again. Appends the write (and a finish Event) to ``actions``; a
    Plan when that ends the decision, else the write (None: nothing to write).
    """
    write = _status_write(s, obj, vanished, gone=vanished is not None)
    if isinstance(write, Terminal):
        return Plan(tuple(actions), write)
    if write is None:
        return None
    actions.append(write)
    finish = s.kind.finish({**obj, "status": write.status})
    if finish is not None:
        actions.append(_finish_event(finish, cluster))
        return Plan(tuple(actions), Done(), release=True)
    return write


def _vanished_mirror(s: Snapshot, obj: JsonObj, worker: WorkerSnapshot) -> JsonObj | None:
    """The last state of this run's mirror on ``worker``, if it was deleted there."""
    vanished = worker.vanished
    if vanished is None or not is_current(s, obj, worker.name, vanished):
        return None
    return vanished


# -- leaving a worker -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Leave:
    """Why a workload must leave its worker, and whether a lost worker's run ended."""

    why: str
    # The worker is gone for good or not answering: its run is over without it.
    lost: bool
    # Preempted: once its run has ended it waits in its queue again, unplaced.
    requeue: bool = False


def _why_leave(
    s: Snapshot, obj: JsonObj, worker: WorkerSnapshot | None, cluster: str
) -> _Leave | None:
    if worker is None:
        return _Leave(f"worker cluster {cluster} is no longer registered", lost=True)
    if worker.lost:
        return _Leave(f"worker cluster {cluster} was lost (not connected for too long)", lost=True)
    preempted_by = _preempted_by(obj)
    if preempted_by and not _redispatch_never(obj):  # at most once: never run again
        return _Leave(f"preempted by {preempted_by}", lost=False, requeue=True)
    if s.leaving is not None and s.leaving[0] == cluster:
        return _Leave(s.leaving[1], lost=False)  # a move begun earlier: its mirror is going
    stuck = _stuck_pending(s, obj, worker)
    if stuck is not None:
        return _Leave(stuck, lost=False)
    if not worker.drain or _redispatch_never(obj):
        return None
    mirror = worker.seen if _live_mirror_of(worker.seen, obj, s, worker.name) else None
    if worker.drain is DrainMode.ALL or mirror is None or not s.kind.has_started(mirror):
        return _Leave(f"worker cluster {cluster} is being drained", lost=False)
    return None


def _stuck_pending(s: Snapshot, obj: JsonObj, worker: WorkerSnapshot) -> str | None:
    """Why the mirror should move: its pods have stayed unschedulable on ``worker`` for
    longer than the pending timeout (the cluster lost capacity under it), none of them
    runs (unless the workload asks to move anyway), and another cluster fits now."""
    timeout = s.settings.pending_timeout
    waited = worker.unschedulable_for
    if timeout <= 0 or waited is None or waited < timeout or _redispatch_never(obj):
        return None
    if not _live_mirror_of(worker.seen, obj, s, worker.name):
        return None
    # Started: one of its pods is on a node or running now. Pods that ended (evicted
    # with their node, say) are counted by the mirror and carried over by the move.
    if worker.pods_started and not _redispatch_always(obj):
        return None
    elsewhere = _placement(s, obj, {**_foreign_holders(s), worker.name: _LEAVING}, [])
    if not isinstance(elsewhere, _Placed):
        return None  # nowhere better: it keeps waiting where it is
    return (
        f"its pods stayed unschedulable on worker cluster {worker.name} for "
        f"{int(waited)}s (--pending-timeout {int(timeout)}s)"
    )


def _move(
    s: Snapshot,
    obj: JsonObj,
    worker: WorkerSnapshot | None,
    cluster: str,
    history: tuple[str, ...],
    leave: _Leave,
    actions: list[Action],
) -> Plan:
    plan = _move_steps(s, obj, worker, cluster, history, leave, actions)
    if leave.lost or leave.requeue or any(isinstance(a, Place) for a in plan.actions):
        return plan
    # Until it is placed elsewhere the move goes on, even once its mirror is gone and
    # nothing on the worker says why it left (its pods were unschedulable, say).
    return dataclasses.replace(plan, leaving=(cluster, leave.why))


def _move_steps(
    s: Snapshot,
    obj: JsonObj,
    worker: WorkerSnapshot | None,
    cluster: str,
    history: tuple[str, ...],
    leave: _Leave,
    actions: list[Action],
) -> Plan:
    """Take the workload off ``cluster`` and place it again elsewhere, counters carried over.

    From a worker that answers (a drain), its mirror is deleted first and the
    move waits until its pods are gone: never two runs at once. A lost worker
    cannot be asked: the move goes ahead, its mirror is deleted when it answers
    again, and its status is never copied.
    """
    kind = s.kind
    if leave.lost and _redispatch_never(obj):
        message = (
            f"{leave.why}; this {kind.ref.kind} asks to run at most once "
            f"({REDISPATCH_ANNOTATION}: {REDISPATCH_NEVER}), so it is not run again elsewhere"
        )
        failed = kind.failed_status(obj, "WorkerLost", message, now=s.now)
        actions.append(RecordEvent("Warning", "WorkerLost", message))
        if failed is None:
            return Plan(tuple(actions), RequeueAfter(s.settings.unplaceable_retry))
        checked = _checked_write(s, obj, failed)
        if isinstance(checked, Terminal):
            return Plan(tuple(actions), checked)
        return Plan((*actions, checked), Done(), release=True)
    if worker is not None and not leave.lost:
        if not worker.connected:
            # A drained worker that does not answer: its mirror cannot be stopped yet,
            # and moving without that could run the workload twice.
            return Plan(tuple(actions), RequeueAfter(s.settings.unplaceable_retry))
        mirror = worker.seen
        if mirror is not None and is_current(s, obj, cluster, mirror):
            if not _meta(mirror).get("deletionTimestamp") and _uid(mirror) not in s.deleting:
                actions.append(
                    _delete(cluster, mirror, leave.why + ": moving it", wait_for_pods=True)
                )
            return Plan(tuple(actions), Retry(f"waiting for its mirror on {cluster} to be gone"))
    if not s.fresh:
        # The status decides what the next run carries over: the apiserver's, not the cache's.
        return Plan(tuple(actions), ReadFresh(obj=True))
    vanished = None if worker is None or leave.lost else _vanished_mirror(s, obj, worker)
    ended = _end_of_run(s, obj, vanished, cluster, actions)
    if isinstance(ended, Plan):
        return ended
    if ended is not None:
        return Plan(tuple(actions), Done())  # moved once the watch shows that status
    if leave.requeue:
        # Its run is over and counted: it waits in its queue, its placements kept (the
        # next one is a new run), until an admission pass admits it again.
        actions.append(Annotate({CLUSTER_ANNOTATION: None}))
        actions.append(Log("info", f"{leave.why}: its run on {cluster} ended, back in its queue"))
        return Plan(tuple(actions), Done())
    placed = _placement(s, obj, {**_foreign_holders(s), cluster: _LEAVING}, actions)
    if isinstance(placed, Plan):
        return placed
    if isinstance(placed, _Unplaceable):
        return _not_placed(s, obj, placed, actions, leaving=(cluster, leave.why))
    if leave.lost:
        actions.append(RecordEvent("Warning", "WorkerLost", f"{leave.why}: running it elsewhere"))
    message = (
        f"Redispatched to worker cluster {placed.cluster} (run {len(history) + 1}): {leave.why}"
    )
    actions.append(Place(placed.cluster, _version(obj), (*history, placed.cluster), placed.demand))
    actions.append(RecordEvent("Normal", "Redispatched", message))
    actions.append(Log("info", message))
    return Plan(tuple(actions), Done())


def _preempted_by(obj: JsonObj) -> str:
    return str(_annotations(obj).get(PREEMPTED_BY_ANNOTATION) or "").strip()


def _requeued(obj: JsonObj, cluster: str, history: tuple[str, ...]) -> bool:
    """Preempted, its run ended: unplaced with its placements kept, back in its queue."""
    return bool(history) and not cluster and bool(_preempted_by(obj))


def _redispatch_never(obj: JsonObj) -> bool:
    return str(_annotations(obj).get(REDISPATCH_ANNOTATION) or "").strip() == REDISPATCH_NEVER


def _redispatch_always(obj: JsonObj) -> bool:
    return str(_annotations(obj).get(REDISPATCH_ANNOTATION) or "").strip() == REDISPATCH_ALWAYS


def _finish_event(finish: Finish, cluster: str) -> RecordEvent:
    if finish.succeeded:
        return RecordEvent("Normal", "Completed", f"Completed on worker cluster {cluster}")
    detail = f"{finish.reason} {finish.message}".strip()
    return RecordEvent(
        "Warning", "Failed", f"Failed on worker cluster {cluster}: {detail}".rstrip(": ")
    )


def _batch_wait(s: Snapshot, obj: JsonObj, write: WriteStatus | None) -> float | None:
    """How much longer a transitional status step waits to be copied in one batch with
    the next one (which a mirror change brings sooner); None: write it now."""
    period = s.settings.status_batch_period
    if write is None or period <= 0:
        return None
    waited = s.batching_for or 0.0
    if waited >= period or not s.kind.is_transitional(obj, {**obj, "status": write.status}):
        return None
    return period - waited


def _status_write(
    s: Snapshot, obj: JsonObj, mirror: JsonObj | None, *, gone: bool = False
) -> WriteStatus | Terminal | None:
    """A status write when the status should change; Terminal if the kind's rules refuse it,
    or if the mirror's status cannot be read (a worker may answer anything)."""
    try:
        status = s.kind.next_status(obj, mirror, now=s.now, gone=gone)
    except _UNREADABLE as error:
        return Terminal(
            "StatusNotCopied",
            f"the status of its mirror cannot be read ({type(error).__name__}: {error}); "
            f"the {s.kind.ref.kind} keeps the status it has",
        )
    if status is None:
        return None
    return _checked_write(s, obj, status)


# What reading a malformed status raises (a list where a count belongs, say).
_UNREADABLE = (TypeError, ValueError, AttributeError, KeyError, IndexError)


def _checked_write(s: Snapshot, obj: JsonObj, status: JsonObj) -> WriteStatus | Terminal:
    try:
        violations = s.kind.status_violations(obj, {**obj, "status": status})
    except _UNREADABLE as error:
        violations = [f"{type(error).__name__}: {error}"]
    if violations:
        return Terminal(
            "StatusNotCopied",
            "jobrelay will not write a status the API rules refuse (a jobrelay bug, please "
            f"report it): {'; '.join(violations)}",
        )
    patch = merge_patch(obj.get("status") or {}, status)
    return WriteStatus(patch, _version(obj), status)


def _collision(s: Snapshot, obj: JsonObj, worker: WorkerSnapshot, actions: list[Action]) -> Plan:
    """A namesake jobrelay did not create holds the name: never touch it, place elsewhere."""
    if not s.probed:
        return Plan(tuple(actions), ReadFresh(probe=True))
    foreign = {**_foreign_holders(s), worker.name: _NAMESAKE}
    key, kind = s.key, s.kind.ref.kind
    message = (
        f"worker cluster {worker.name} already has a {kind} {key.key} that jobrelay did not "
        f"create; it is left alone and this {kind} is placed elsewhere"
    )
    actions.extend(_warning("NameCollision", message))
    placed = _placement(s, obj, foreign, actions)
    if isinstance(placed, Plan):
        return placed
    if isinstance(placed, _Unplaceable):
        return _not_placed(s, obj, placed, actions)
    # The watch event of the new placement brings the key back to create the mirror there.
    actions.append(Place(placed.cluster, _version(obj), (placed.cluster,), placed.demand))
    return Plan(tuple(actions), Done())


def _changes_pods(s: Snapshot, mirror: JsonObj, patch: JsonObj) -> bool:
    """Whether ``patch`` changes the pod templates of ``mirror``."""
    return s.kind.pod_templates(apply_merge_patch(mirror, patch)) != s.kind.pod_templates(mirror)


def _held_by_admission(s: Snapshot, actions: list[Action]) -> Plan | None:
    """Before a first placement, before any mirror is created and before a pod-template
    change reaches one: the manager's admission must admit the workload's pods.

    Its Pod Security (or another pod policy) would never see them otherwise: they
    are created on a worker. A refused workload stays unplaced, told why, and is
    asked about again now and then (a relabelled namespace lets it run).
    """
    verdict = s.admission
    if verdict is None:
        return Plan(tuple(actions), ReadFresh(admission=True))
    if verdict.allowed:
        return None
    actions.extend(_warning(verdict.reason, verdict.message))
    return Plan(tuple(actions), RequeueAfter(s.settings.unplaceable_retry))


def _held_by_queue(s: Snapshot, obj: JsonObj, actions: list[Action]) -> Plan | None:
    """Before a first placement: its queue admits it (fleet-wide queues: quota, fair
    share, priority) and its namespace's ResourceQuota on the manager allows it.

    Held otherwise, unplaced, told once per reason (a Warning Event and the not-placed
    annotation; the numbers and its position change without a new one); the admission
    pass brings it back when it admits it, a RelayQueue's change when it waits on one.
    """
    hold = s.queue_hold
    if hold is None:
        return None
    if not hold.settled:
        # The next admission pass (within a second) judges it: no warning for a moment.
        return Plan(tuple(actions), RequeueAfter(1.0), held=s.held or QUEUE_UNJUDGED)
    signature = f"{hold.reason}|{_DETAILS.sub('#', hold.message)}"
    if signature != s.held:
        # The annotation first: whoever sees the Event should find the object saying it.
        said = _bounded(f"{hold.reason}: {hold.message}")
        actions.append(Annotate({NOT_PLACED_ANNOTATION: said}))
        if hold.event_type == "Warning":
            actions.extend(_warning(hold.reason, hold.message))
        else:
            actions.append(RecordEvent(hold.event_type, hold.reason, hold.message))
    return Plan(tuple(actions), RequeueAfter(s.settings.unplaceable_retry), held=signature)


# What the memory keeps of a queued workload no admission pass has judged yet: held (so
# the passes see it), with nothing told.
QUEUE_UNJUDGED = "QueueUnjudged"


# -- dependencies: what its pods need in their namespace ------------------------------------


def _held_by_dependencies(s: Snapshot, obj: JsonObj, actions: list[Action]) -> Plan | None:
    """Before a first placement and before any mirror is created: every ConfigMap, Secret
    and ServiceAccount its pods require is on the manager, and may be copied.

    Held otherwise, unplaced, told once per reason (an Event, and the not-placed
    annotation while it has no placement); the appearance of the missing object
    brings it back (the runner's index of references). An optional one that is
    missing is fine: it is not copied.
    """
    if not s.dependencies:
        return None
    if not s.dependencies_listed:
        return Plan(tuple(actions), Retry("the manager's ConfigMaps and Secrets have not listed"))
    missing = [
        n.dependency for n in s.dependencies if n.source is None and not n.dependency.optional
    ]
    found: tuple[str, str] | None = None
    namespace = _namespace(obj)
    if missing:
        names = ", ".join(str(d) for d in missing)
        verb = "does" if len(missing) == 1 else "do"
        found = (
            "MissingDependency",
            f"{names} {verb} not exist in namespace {namespace}: this {s.kind.ref.kind} "
            "waits until it does, and is copied with it to the worker cluster that runs it",
        )
    for needed in s.dependencies:
        if found is not None:
            break
        refused = None if needed.source is None else refusal(needed.dependency, needed.source)
        if refused is not None:
            found = (refused[0], f"{needed.dependency} {refused[1]}: this "
                     f"{s.kind.ref.kind} waits until it changes")  # fmt: skip
    if found is None:
        return None
    reason, message = found
    signature = f"{reason}|{message}"
    if signature != s.held:
        # The annotation first: the Event is written in the background, and whoever sees
        # it should find the object saying the same.
        if not placement_of(obj):
            actions.append(Annotate({NOT_PLACED_ANNOTATION: _bounded(f"{reason}: {message}")}))
        actions.extend(_warning(reason, message))
    return Plan(tuple(actions), RequeueAfter(s.settings.unplaceable_retry), held=signature)


def _copies(s: Snapshot, worker: WorkerSnapshot, *, owner: JsonObj | None) -> Iterator[Action]:
    """Copy what its pods need onto ``worker`` where our copy is missing, differs from the
    manager's, or (with ``owner``, its mirror) is not owned by the mirror yet."""
    if not s.dependencies or s.obj is None:
        return
    reference = None
    if owner is not None:
        ref = s.kind.ref
        reference = owner_reference(ref.api_version, ref.kind, _name(owner), _uid(owner) or "")
    stale = []
    for needed in s.dependencies:
        source = needed.source
        if source is None or refusal(needed.dependency, source) is not None:
            continue
        if str(needed.dependency) in worker.foreign_dependencies:
            continue  # someone else's there (a mirror made before jobrelay copied): left alone
        copy = worker.copies.get(str(needed.dependency))
        if (
            copy is None
            or copy.digest != source.digest
            or (reference is not None and reference["uid"] not in copy.owners)
        ):
            stale.append(needed.dependency)
    if stale:
        yield CopyDependencies(worker.name, _namespace(s.obj), tuple(stale), reference)


def _foreign_dependencies(
    s: Snapshot, obj: JsonObj, worker: WorkerSnapshot, actions: list[Action]
) -> Plan:
    """A name its pods need is held on its worker by an object jobrelay did not make:
    never overwritten; the workload goes elsewhere (no mirror of it ever ran there)."""
    kind = s.kind.ref.kind
    held = ", ".join(worker.foreign_dependencies)
    message = (
        f"worker cluster {worker.name}: {held} in {_namespace(obj)} "
        f"{'was' if len(worker.foreign_dependencies) == 1 else 'were'} not made by jobrelay; "
        f"left alone, and this {kind} is placed elsewhere"
    )
    history = placements_of(obj)
    placed = _placement(s, obj, _foreign_holders(s), actions)
    if isinstance(placed, Plan):
        return placed
    if isinstance(placed, _Unplaceable):
        return _not_placed(s, obj, placed, actions)
    actions.extend(_warning("ForeignDependency", message))
    fixed = (*history[:-1], placed.cluster)
    actions.append(Place(placed.cluster, _version(obj), fixed, placed.demand))
    return Plan(tuple(actions), Done())


_NAMESAKE = "holds a namesake jobrelay did not create"
_LEAVING = "the workload is leaving it"
_FORGED = "holds a mirror of this workload that jobrelay did not create"


def _foreign_holders(s: Snapshot) -> dict[str, str]:
    """The workers a fresh read showed holding a namesake jobrelay did not create, and
    those holding a mirror of this workload jobrelay did not create (never placed there)."""
    holders = {
        w.name: _NAMESAKE
        for w in s.workers
        if w.read_done
        and w.read is not None
        and not is_ours(w.read, s.settings.controller_name, s.settings.origin)
    }
    obj = s.obj
    for w in s.workers:
        seen = w.seen
        if (
            obj is not None
            and seen is not None
            and w.name not in holders
            and standing(s, obj, w.name, seen) is Standing.FOREIGN
        ):
            holders[w.name] = _FORGED
    return holders


# -- placement --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Placed:
    cluster: str
    # Its pods, reserved on that cluster until the worker has made them.
    demand: tuple[PodGroup, ...]


def _clusters(s: Snapshot) -> list[Cluster]:
    return [placement_cluster(w) for w in s.workers]


def _placement(
    s: Snapshot, obj: JsonObj, excluded: Mapping[str, str], actions: list[Action]
) -> _Placed | _Unplaceable | Plan:
    """Where the workload goes now (filter, then score), or why it cannot go anywhere.

    A workload whose own placement annotations cannot be read is the user's to fix
    (Terminal, until it changes); a namespace policy that cannot be read holds it.
    """
    workload = read_workload(s.kind, obj)
    if isinstance(workload, Invalid):
        message = f"cannot place this {s.kind.ref.kind}: {workload}; fix it and jobrelay places it"
        return Plan(tuple(actions), Terminal(workload.reason, message))
    if isinstance(s.policy, Invalid):
        return _Unplaceable(
            f"the placement policy of namespace {_namespace(obj)} cannot be read "
            f"({s.policy}); a cluster admin must fix the namespace's annotations",
            "policy-invalid",
        )
    decision = place(_clusters(s), workload, s.policy, excluded=excluded)
    if decision.cluster is None:
        return _Unplaceable.of(decision)
    return _Placed(decision.cluster, workload.groups)


@dataclass(frozen=True, slots=True)
class _Unplaceable:
    """No cluster can take the workload now: the explanation, and a signature of it
    that stays the same while the reasons do (numbers and details left out)."""

    explanation: str
    signature: str
    never_fits: bool = False
    # Only because some cluster's capacity is not known yet (the controller is starting).
    unknown: bool = False

    @classmethod
    def of(cls, decision: Decision) -> _Unplaceable:
        signature = ";".join(
            f"{p.cluster}:{p.by}:{_DETAILS.sub('#', p.reason)}" for p in decision.passed_over
        )
        unknown = any(p.reason in _NOT_KNOWN_YET for p in decision.passed_over)
        return cls(
            decision.explain(),
            ("NeverFits|" if decision.never_fits else "NotPlaced|") + signature,
            decision.never_fits,
            unknown,
        )


# What a controller that is starting does not know yet: a moment's wait, not a warning.
_NOT_KNOWN_YET = frozenset({NOT_KNOWN, NAMESPACES_NOT_KNOWN, CLAIMS_NOT_KNOWN})
# What changes in an explanation while its reason does not: counts, per-node detail.
_DETAILS = re.compile(r"\([^)]*\)|\d+")


def _not_placed(
    s: Snapshot,
    obj: JsonObj,
    why: _Unplaceable,
    actions: list[Action],
    *,
    leaving: tuple[str, str] | None = None,
) -> Plan:
    """The workload waits on the manager, unplaced: no mirror anywhere.

    The user is told why (a Warning Event, and the annotation jobrelay.dev/not-placed
    on the object) when the reason changes, not on every retry; the reconciler
    brings held workloads back as soon as a cluster's capacity changes.
    """
    kind = s.kind.ref.kind
    prefix = f"{leaving[1]}, and " if leaving is not None else ""
    if why.never_fits:
        reason = "NeverFits"
        message = (
            f"{prefix}no worker cluster this {kind} may use could run it even if it were "
            f"empty: {why.explanation}. It waits until such a cluster is registered; "
            f"change its requests or its {CLUSTER_ANNOTATION}s annotations to run it"
        )
    else:
        reason = "NotPlaced"
        message = (
            f"{prefix}no worker cluster can take this {kind} now: {why.explanation}. "
            f"It waits on the management cluster and is placed as soon as one can"
        )
    if why.unknown and not why.never_fits:
        # Capacities are being read (a start-up): their arrival brings it back; no
        # warning for what is only a moment's wait.
        return Plan(tuple(actions), RequeueAfter(s.settings.unplaceable_retry), held=s.held,
                    leaving=leaving)  # fmt: skip
    if why.signature != s.held:
        # The annotation first: the Event is written in the background, and whoever sees
        # it should find the object saying the same.
        actions.append(Annotate({NOT_PLACED_ANNOTATION: _bounded(f"{reason}: {why.explanation}")}))
        actions.append(RecordEvent("Warning", reason, message))
        actions.append(Log("info", message))
    return Plan(
        tuple(actions),
        RequeueAfter(s.settings.unplaceable_retry),
        held=why.signature,
        leaving=leaving,
    )


# The not-placed annotation says why in a line; an explanation over many workers (or
# quoting a tenant's long annotation) must not grow the object toward its size limit.
NOT_PLACED_LIMIT = 2048


def _bounded(text: str) -> str:
    if len(text) <= NOT_PLACED_LIMIT:
        return text
    return f"{text[: NOT_PLACED_LIMIT - 40]}... ({len(text) - NOT_PLACED_LIMIT + 40} more)"


def _live_mirror_of(mirror: JsonObj | None, obj: JsonObj, s: Snapshot, where: str) -> bool:
    """Whether ``mirror`` on ``where`` is the one followed, and not going."""
    return (
        mirror is not None
        and is_current(s, obj, where, mirror)
        and not _meta(mirror).get("deletionTimestamp")
        and str(_meta(mirror).get("uid")) not in s.deleting
    )


def _followed_going_elsewhere(s: Snapshot, obj: JsonObj, history: tuple[str, ...]) -> str | None:
    """The worker, off its placement, where its followed mirror is being deleted: nothing
    runs where it is placed until that one is gone (never two runs at once). One that
    does not answer cannot say when: it is not waited for (its return deletes it)."""
    if not history:
        return None
    for worker in s.workers:
        seen = worker.seen
        if (
            worker.name != history[-1]
            and worker.connected
            and seen is not None
            and standing(s, obj, worker.name, seen) is Standing.FOLLOWED
            and not _live_mirror_of(seen, obj, s, worker.name)
        ):
            return worker.name
    return None


def _stop_excluded(
    worker: WorkerSnapshot, history: tuple[str, ...], excluded: str, actions: list[Action]
) -> Plan:
    """Its recorded mirror runs off its placement, on a worker it may not be given: that
    run is stopped (its pods gone first) and the workload stays where it is placed."""
    message = (
        f"placed on worker cluster {history[-1]} (annotations {CLUSTER_ANNOTATION}, "
        f"{PLACEMENTS_ANNOTATION}) while its mirror runs on {worker.name}; {excluded}, so "
        f"it is not placed there: its mirror there is stopped and it runs on {history[-1]}"
    )
    actions.extend(_warning("PlacementConflict", message))
    if worker.connected and worker.seen is not None:
        actions.append(_delete(worker.name, worker.seen, excluded, wait_for_pods=True))
    return Plan(tuple(actions), Retry(f"waiting for its mirror on {worker.name} to be gone"))


def _warning(reason: str, message: str) -> tuple[RecordEvent, Log]:
    """A Warning Event on the workload, and the same in the controller's log."""
    return RecordEvent("Warning", reason, message), Log("warning", message)


def _any_foreign(s: Snapshot, obj: JsonObj) -> bool:
    return any(
        w.seen is not None and standing(s, obj, w.name, w.seen) is Standing.FOREIGN
        for w in s.workers
    )


def _foreign_reports(s: Snapshot, obj: JsonObj) -> Iterator[Action]:
    """Tell of every object that carries this workload's marks but that jobrelay did not
    create: it is left alone, neither followed nor deleted."""
    for worker in s.workers:
        seen = worker.seen
        if seen is None or standing(s, obj, worker.name, seen) is not Standing.FOREIGN:
            continue
        kind = s.kind.ref.kind
        message = (
            f"worker cluster {worker.name} has a {kind} {s.key.key} (uid "
            f"{_meta(seen).get('uid')}, run {run_of(seen)}) that carries this {kind}'s marks "
            f"but that jobrelay did not create: it is not followed and left alone"
        )
        yield from _warning("ForeignMirror", message)


@dataclass(frozen=True, slots=True)
class _Keep:
    """A deletion pass spares the mirror followed (only a finished one, with
    ``finished_only``); foreign ones are never deleted while the object lives."""

    finished_only: bool = False


def _deletions(s: Snapshot, *, keep: _Keep | None) -> Iterator[DeleteMirror]:
    """Delete every cached mirror of this key but the kept ones (and those already going).

    Workers that do not answer are skipped: their mirrors are deleted when they
    answer again (their return brings every key they hold back).
    """
    obj = s.obj
    for worker in s.workers:
        mirror = worker.mirror
        if mirror is None or _meta(mirror).get("deletionTimestamp") or not worker.connected:
            continue
        if str(_meta(mirror).get("uid")) in s.deleting:
            continue
        if obj is None or _meta(obj).get("deletionTimestamp"):
            why = f"its management {s.kind.ref.kind} is gone"
        elif origin_uid(mirror) != _uid(obj):
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
        yield _delete(worker.name, mirror, why)


def _delete(
    cluster: str, mirror: JsonObj, why: str, *, wait_for_pods: bool = False
) -> DeleteMirror:
    return DeleteMirror(
        cluster,
        _name(mirror),
        _namespace(mirror),
        str(_meta(mirror).get("uid")),
        why,
        wait_for_pods=wait_for_pods,
    )


def _uid(obj: JsonObj | None) -> str | None:
    return None if obj is None else str(_meta(obj).get("uid"))


def _version(obj: JsonObj) -> str:
    return str(_meta(obj).get("resourceVersion"))


def _name(obj: JsonObj) -> str:
    return str(_meta(obj).get("name"))


def _namespace(obj: JsonObj) -> str:
    return str(_meta(obj).get("namespace"))
