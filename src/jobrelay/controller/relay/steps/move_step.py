"""Fifth step: a placed workload that must leave its worker. Pure.

An admission pass that chose it as a victim marks it preempted first (the mark is
restart-safe); then it leaves a worker that is gone or lost, a preemption, a move
begun earlier, pods stuck unschedulable while another cluster fits, or a drain
(steps/moving.py takes it off and places it again).
"""

from __future__ import annotations

from jobrelay.admission.preemption_rules import PREEMPTED
from jobrelay.controller.relay.leaving import WorkerFailure
from jobrelay.controller.relay.plan import Annotate, Done
from jobrelay.controller.relay.snapshot import Snapshot, WorkerSnapshot
from jobrelay.controller.relay.steps.facts import (
    live_mirror_of,
    preempted_by,
    redispatch_always,
    redispatch_never,
)
from jobrelay.controller.relay.steps.moving import Leave, move
from jobrelay.controller.relay.steps.placement_search import (
    LEAVING,
    PlacedOn,
    excluded_workers,
    placement,
)
from jobrelay.controller.relay.steps.plan_parts import warning
from jobrelay.controller.relay.steps.step_types import Continue, Progress, StepAnswer, Stop
from jobrelay.controller.relay.steps.worker_failures import budget_spent
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import PREEMPTED_BY_ANNOTATION
from jobrelay.vocabulary.workercluster import DrainMode


class MoveStep:
    name = "moves"

    def run(self, s: Snapshot, progress: Progress) -> StepAnswer:
        obj, cluster = progress.obj, progress.cluster
        worker = progress.worker = s.worker(cluster)
        if s.preempt is not None and not progress.placed_now and not preempted_by(obj):
            # The mark first, restart-safe: from here its run ends and it waits in its queue.
            progress.actions.append(Annotate({PREEMPTED_BY_ANNOTATION: s.preempt.by}))
            progress.actions.extend(warning(PREEMPTED, s.preempt.message))
            return progress.plan(Done())  # the mark's watch event brings it back
        leaving = why_leave(s, obj, worker, cluster)
        if leaving is not None:
            return Stop(move(s, obj, worker, cluster, progress.history, leaving, progress.actions))
        return Continue()


def why_leave(
    s: Snapshot, obj: JsonObj, worker: WorkerSnapshot | None, cluster: str
) -> Leave | None:
    """Why the workload must leave ``cluster`` now (None: it stays)."""
    if worker is None:
        return Leave(f"worker cluster {cluster} is no longer registered", lost=True)
    if worker.lost:
        return Leave(f"worker cluster {cluster} was lost (not connected for too long)", lost=True)
    preempted = preempted_by(obj)
    if preempted and not redispatch_never(obj):  # at most once: never run again
        return Leave(f"preempted by {preempted}", lost=False, requeue=True)
    if s.leaving is not None and s.leaving.cluster == cluster:
        # A move begun earlier: its mirror is going.
        return Leave(s.leaving.why, lost=False, worker_failure=s.leaving.worker_failure)
    failed = _worker_failure(s, obj, worker)
    if failed is not None:
        return failed
    stuck = _stuck_pending(s, obj, worker)
    if stuck is not None:
        return stuck
    if not worker.drain or redispatch_never(obj):
        return None
    mirror = worker.seen if live_mirror_of(worker.seen, obj, s, worker.name) else None
    if worker.drain is DrainMode.ALL or mirror is None or not s.kind.has_started(mirror):
        return Leave(f"worker cluster {cluster} is being drained", lost=False)
    return None


def _worker_failure(s: Snapshot, obj: JsonObj, worker: WorkerSnapshot) -> Leave | None:
    """Why the mirror should move: one of its pods cannot run on ``worker`` for the
    worker's fault (its image cannot be pulled there, say), and its move budget is not
    spent; never for a workload that asks to run at most once."""
    fault = worker.worker_fault
    if fault is None or redispatch_never(obj):
        return None
    if not live_mirror_of(worker.seen, obj, s, worker.name):
        return None
    if budget_spent(s, obj):
        return None  # it stays, as Kubernetes alone would leave it
    return Leave(
        f"{fault} on worker cluster {worker.name}",
        lost=False,
        worker_failure=WorkerFailure.FAULT,
    )


def _stuck_pending(s: Snapshot, obj: JsonObj, worker: WorkerSnapshot) -> Leave | None:
    """Why the mirror should move: its pods have stayed unschedulable on ``worker`` for
    longer than the pending timeout (the cluster lost capacity under it), none of them
    runs (unless the workload asks to move anyway), and another cluster fits now."""
    timeout = s.settings.pending_timeout
    waited = worker.unschedulable_for
    if timeout <= 0 or waited is None or waited < timeout or redispatch_never(obj):
        return None
    if budget_spent(s, obj):
        return None
    if not live_mirror_of(worker.seen, obj, s, worker.name):
        return None
    # Started: one of its pods is on a node or running now. Pods that ended (evicted
    # with their node, say) are counted by the mirror and carried over by the move.
    if worker.pods_started and not redispatch_always(obj):
        return None
    elsewhere = placement(s, obj, {**excluded_workers(s), worker.name: LEAVING}, [])
    if not isinstance(elsewhere, PlacedOn):
        return None  # nowhere better: it keeps waiting where it is
    why = (
        f"its pods stayed unschedulable on worker cluster {worker.name} for "
        f"{int(waited)}s (--pending-timeout {int(timeout)}s)"
    )
    return Leave(why, lost=False, worker_failure=WorkerFailure.PENDING)
