"""Taking a workload off its worker and placing it again elsewhere, counters carried
over; asked by the move step (the worker is lost, drained, or the workload is
preempted or stuck pending) and by the mirror step (its mirror may not be created
where it is placed). Pure.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from jobrelay.admission.preemption_rules import PREEMPTED
from jobrelay.controller.relay.leaving import Leaving, WorkerFailure
from jobrelay.controller.relay.mirror_standing import is_current
from jobrelay.controller.relay.plan import (
    Action,
    Annotate,
    Done,
    Log,
    Place,
    Plan,
    ReadFresh,
    RecordEvent,
    RequeueAfter,
    Retry,
    Terminal,
)
from jobrelay.controller.relay.snapshot import Snapshot, WorkerSnapshot
from jobrelay.controller.relay.steps.facts import meta, redispatch_never, uid
from jobrelay.controller.relay.steps.placement_search import (
    LEAVING,
    PlacedOn,
    Unplaceable,
    excluded_workers,
    not_placed,
    placement,
)
from jobrelay.controller.relay.steps.plan_parts import delete, place
from jobrelay.controller.relay.steps.status_writes import checked_write, end_of_run, vanished_mirror
from jobrelay.controller.relay.steps.worker_failures import moves_allowed
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import (
    CLUSTER_ANNOTATION,
    REDISPATCH_ANNOTATION,
    REDISPATCH_NEVER,
    WORKER_FAILURES_ANNOTATION,
)
from jobrelay.vocabulary.placement import with_worker_failure, worker_failures_of

# The Warning a workload gets when it moves after a worker-side failure.
MOVED_AFTER_WORKER_FAILURE = "MovedAfterWorkerFailure"


@dataclass(frozen=True, slots=True)
class Leave:
    """Why a workload must leave its worker, and whether a lost worker's run ended."""

    why: str
    # The worker is gone for good or not answering: its run is over without it.
    lost: bool
    # Preempted: once its run has ended it waits in its queue again, unplaced.
    requeue: bool = False
    # Its pods cannot run there for the worker's fault (kinds/pod_faults.py): the move is
    # recorded and counted against its move budget (worker_failures.py).
    worker_failure: WorkerFailure | None = None


def move(
    s: Snapshot,
    obj: JsonObj,
    worker: WorkerSnapshot | None,
    cluster: str,
    history: tuple[str, ...],
    leave: Leave,
    actions: list[Action],
) -> Plan:
    plan = _move_steps(s, obj, worker, cluster, history, leave, actions)
    if leave.lost or leave.requeue or any(isinstance(a, Place) for a in plan.actions):
        return plan
    # Until it is placed elsewhere the move goes on, even once its mirror is gone and
    # nothing on the worker says why it left (its pods were unschedulable, say).
    return dataclasses.replace(plan, leaving=Leaving(cluster, leave.why, leave.worker_failure))


def _move_steps(
    s: Snapshot,
    obj: JsonObj,
    worker: WorkerSnapshot | None,
    cluster: str,
    history: tuple[str, ...],
    leave: Leave,
    actions: list[Action],
) -> Plan:
    """Take the workload off ``cluster`` and place it again elsewhere, counters carried over.

    From a worker that answers (a drain), its mirror is deleted first and the
    move waits until its pods are gone: never two runs at once. A lost worker
    cannot be asked: the move goes ahead, its mirror is deleted when it answers
    again, and its status is never copied.
    """
    if leave.lost and redispatch_never(obj):
        return _ends_at_most_once(s, obj, leave, actions)
    if worker is not None and not leave.lost:
        stopping = _stop_there_first(s, obj, worker, cluster, leave, actions)
        if stopping is not None:
            return stopping
    if not s.fresh:
        # The status decides what the next run carries over: the apiserver's, not the cache's.
        return Plan(tuple(actions), ReadFresh(obj=True))
    vanished = None if worker is None or leave.lost else vanished_mirror(s, obj, worker)
    ended = end_of_run(s, obj, vanished, cluster, actions)
    if isinstance(ended, Plan):
        return ended
    if ended is not None:
        return Plan(tuple(actions), Done())  # moved once the watch shows that status
    if leave.requeue:
        # Its run is over and counted: it waits in its queue, its placements kept (the
        # next one is a new run), until an admission pass admits it again.
        actions.append(Annotate({CLUSTER_ANNOTATION: None}))
        ended_message = f"{leave.why}: its run on {cluster} ended, back in its queue"
        if not s.told_preempted:
            # Marked by a controller that stopped since: its Warning may never have been sent.
            actions.append(RecordEvent("Warning", PREEMPTED, ended_message))
        actions.append(Log("info", ended_message))
        return Plan(tuple(actions), Done())
    placed = placement(s, obj, {**excluded_workers(s), cluster: LEAVING}, actions)
    if isinstance(placed, Plan):
        return placed
    if isinstance(placed, Unplaceable):
        return not_placed(
            s, placed, actions, leaving=Leaving(cluster, leave.why, leave.worker_failure)
        )
    if leave.worker_failure is not None:
        return _moved_after_failure(s, obj, cluster, history, leave, placed, actions)
    if leave.lost:
        actions.append(RecordEvent("Warning", "WorkerLost", f"{leave.why}: running it elsewhere"))
    message = (
        f"Redispatched to worker cluster {placed.cluster} (run {len(history) + 1}): {leave.why}"
    )
    actions.append(place(obj, placed.cluster, (*history, placed.cluster), placed.demand))
    actions.append(RecordEvent("Normal", "Redispatched", message))
    actions.append(Log("info", message))
    return Plan(tuple(actions), Done())


def _moved_after_failure(
    s: Snapshot,
    obj: JsonObj,
    cluster: str,
    history: tuple[str, ...],
    leave: Leave,
    placed: PlacedOn,
    actions: list[Action],
) -> Plan:
    """Placed elsewhere after a worker-side failure on ``cluster``: the move is recorded in
    the placement's own write (counted against its budget, that worker avoided a while)."""
    allowed = moves_allowed(obj, s.settings.max_moves)
    made = len(worker_failures_of(obj)) + 1
    record = ((WORKER_FAILURES_ANNOTATION, with_worker_failure(obj, cluster, s.now)),)
    actions.append(place(obj, placed.cluster, (*history, placed.cluster), placed.demand, record))
    last = (
        " (its last: it stays where it goes whatever fails there)" if made >= allowed.limit else ""
    )
    note = f"; {allowed.note}" if allowed.note else ""
    message = (
        f"moved from worker cluster {cluster} to {placed.cluster} (run {len(history) + 1}, "
        f"move {made} of {allowed.limit}{last}): {leave.why}{note}"
    )
    actions.append(RecordEvent("Warning", MOVED_AFTER_WORKER_FAILURE, message))
    if leave.worker_failure is WorkerFailure.PENDING:
        # What a pending-timeout move has always been told (before worker-side failures
        # were counted), kept for those who read it.
        redispatched = f"Redispatched to worker cluster {placed.cluster} (run {len(history) + 1})"
        actions.append(RecordEvent("Normal", "Redispatched", f"{redispatched}: {leave.why}"))
    actions.append(Log("info", message))
    return Plan(tuple(actions), Done())


def _stop_there_first(
    s: Snapshot,
    obj: JsonObj,
    worker: WorkerSnapshot,
    cluster: str,
    leave: Leave,
    actions: list[Action],
) -> Plan | None:
    """From a worker that answers, its run is stopped before it runs anywhere else: the
    plan that waits for that (None: nothing of it runs there)."""
    if not worker.connected:
        # A drained worker that does not answer: its mirror cannot be stopped yet,
        # and moving without that could run the workload twice.
        return Plan(tuple(actions), RequeueAfter(s.settings.unplaceable_retry))
    mirror = worker.seen
    if mirror is None or not is_current(s, obj, cluster, mirror):
        return None
    if not meta(mirror).get("deletionTimestamp") and uid(mirror) not in s.deleting:
        actions.append(delete(cluster, mirror, leave.why + ": moving it", wait_for_pods=True))
    return Plan(tuple(actions), Retry(f"waiting for its mirror on {cluster} to be gone"))


def _ends_at_most_once(s: Snapshot, obj: JsonObj, leave: Leave, actions: list[Action]) -> Plan:
    """Its worker is lost and it asks to run at most once: it fails, not run elsewhere."""
    kind = s.kind
    message = (
        f"{leave.why}; this {kind.ref.kind} asks to run at most once "
        f"({REDISPATCH_ANNOTATION}: {REDISPATCH_NEVER}), so it is not run again elsewhere"
    )
    failed = kind.failed_status(obj, "WorkerLost", message, now=s.now)
    actions.append(RecordEvent("Warning", "WorkerLost", message))
    if failed is None:
        return Plan(tuple(actions), RequeueAfter(s.settings.unplaceable_retry))
    checked = checked_write(s, obj, failed)
    if isinstance(checked, Terminal):
        return Plan(tuple(actions), checked)
    return Plan((*actions, checked), Done(), release=True)
