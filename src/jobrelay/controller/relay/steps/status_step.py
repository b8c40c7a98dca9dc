"""Last step: the management object's status follows its mirror's. Pure.

Never a status the kind's rules refuse (Terminal instead). A passing step waits
a moment to be copied with the next (the status batch period). A finished run
ends the workload: a finish Event, its ProvisioningRequests go, and its mirror goes,
or is kept (with its pods' logs) until ``--finished-mirror-ttl`` has passed (looked
at again then).
Otherwise it is looked at again when its unschedulable pods' pending timeout
runs out (no watch event says that time has passed).
"""

from __future__ import annotations

from jobrelay.controller.relay.plan import Done, Plan, RequeueAfter, Terminal, WriteStatus
from jobrelay.controller.relay.snapshot import Snapshot, WorkerSnapshot
from jobrelay.controller.relay.steps.claiming_capacity import requests_going
from jobrelay.controller.relay.steps.plan_parts import delete, finish_event
from jobrelay.controller.relay.steps.status_writes import status_write
from jobrelay.controller.relay.steps.step_types import Progress, StepAnswer, Stop
from jobrelay.kinds.finished_mirrors import kept_for
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.outcome import Lane


class StatusStep:
    name = "status"

    def run(self, s: Snapshot, progress: Progress) -> StepAnswer:
        obj, cluster, mirror, worker = (
            progress.obj,
            progress.cluster,
            progress.mirror,
            progress.worker,
        )
        assert mirror is not None and worker is not None  # the mirror step stops otherwise
        actions, sync = progress.actions, progress.sync
        write = status_write(s, obj, mirror)
        if isinstance(write, Terminal):
            return progress.plan(write, release=True)
        batch_wait = _batch_wait(s, obj, write)
        if batch_wait is not None:
            waiting = RequeueAfter(batch_wait)
            return Stop(Plan((*actions, *sync), waiting, release=True, batching=True))
        if write is not None:
            actions.append(write)
            finish = s.kind.finish({**obj, "status": write.status})
            if finish is not None:
                event = finish_event(finish, cluster, completed_events=s.settings.completed_events)
                if event is not None:
                    actions.append(event)
                finished = {**obj, "status": write.status}
                kept = kept_for(s.kind, finished, s.settings.finished_mirrors)
                if kept is not None and (kept <= 0 or not finish.at):  # as the deletion step
                    why = f"its {s.kind.ref.kind} has finished"
                    actions.append(delete(cluster, mirror, why))
                # Its ProvisioningRequests go now (its echo is not looked at).
                actions.extend(requests_going(s, finished, besides=actions))
                progress.record = None  # finished: its mirror needs no record any more
                # Kept: it finished just now, so it goes ``kept`` from now (the deletion
                # step of the next look counts from the finish time its status gives).
                until = RequeueAfter(kept, Lane.BACKGROUND) if kept and finish.at else Done()
                return progress.plan(until, release=True, echo_needed=False)
        # The status copied ends the decision: its echo brings nothing to do.
        outcome = _until_pending_timeout(s, worker)
        return Stop(Plan((*actions, *sync), outcome, release=True, echo_needed=False))


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


def _until_pending_timeout(s: Snapshot, worker: WorkerSnapshot) -> Done | RequeueAfter:
    """Look again when the pending timeout of its unschedulable pods runs out (no watch
    event says that time has passed)."""
    timeout, waited = s.settings.pending_timeout, worker.unschedulable_for
    if timeout <= 0 or waited is None:
        return Done()
    return RequeueAfter(max(1.0, timeout - waited) if waited < timeout else timeout)
