"""Fourth step: a workload that is not placed gets its placement. Pure.

Created suspended, it is not placed (nothing runs anywhere until it is resumed):
its status is kept up to date and the decision ends. A mirror that runs keeps
it where it is (its placement annotations were lost). Otherwise placement's
filters and scores choose (or it waits unplaced, told why), after capacity an
autoscaled worker provisioned for it; one that fits only capacity such a worker can
add claims it there (claiming_capacity.py). A workload preempted
and back in its queue runs again where it is admitted, as a new run after those
it had. The placement is asked for first, ahead of whatever follows in the plan.
"""

from __future__ import annotations

from jobrelay.controller.relay.plan import Done, Plan, Terminal
from jobrelay.controller.relay.snapshot import Snapshot
from jobrelay.controller.relay.steps.claiming_capacity import (
    awaits_answer,
    claim_capacity,
    provisioned_placement,
    requests_going,
)
from jobrelay.controller.relay.steps.placement_search import (
    Unplaceable,
    excluded_workers,
    not_placed,
    placement,
)
from jobrelay.controller.relay.steps.plan_parts import place
from jobrelay.controller.relay.steps.status_writes import status_write
from jobrelay.controller.relay.steps.step_types import Continue, Progress, StepAnswer, Stop
from jobrelay.placement.workload import PodGroup
from jobrelay.vocabulary.placement import with_placement


class PlacingStep:
    name = "placing"

    def run(self, s: Snapshot, progress: Progress) -> StepAnswer:
        obj = progress.obj
        if progress.cluster:
            return Continue()
        if s.kind.is_suspended(obj):
            # Created suspended: nothing runs anywhere until it is resumed.
            write = status_write(s, obj, None)
            if isinstance(write, Terminal):
                return progress.plan(write)
            if write is not None:
                progress.actions.append(write)
            return progress.plan(Done())
        demand: tuple[PodGroup, ...] = ()
        if progress.live:
            cluster = progress.live[0].name  # its placement annotations were lost: keep it
        else:
            excluded = excluded_workers(s)
            # Capacity an autoscaled worker provisioned for it first: there.
            placed = provisioned_placement(s, obj, set(excluded)) or placement(
                s, obj, excluded, progress.actions
            )
            if isinstance(placed, Plan):
                return Stop(placed)
            if isinstance(placed, Unplaceable):
                claimed = claim_capacity(s, obj, placed, progress.actions)
                return Stop(claimed or not_placed(s, placed, progress.actions))
            waits = awaits_answer(s, obj, placed, progress.actions)
            if waits is not None:
                return Stop(waits)
            cluster, demand = placed.cluster, placed.demand
        history = progress.history
        if not progress.requeued:
            history = (cluster,)
        elif not progress.live:
            # Preempted, it runs again where admitted, as a new run after those it had.
            history = (*history, cluster)
        progress.actions.append(place(obj, cluster, history, demand))
        # Its requests for capacity elsewhere go at once, after the placement is written.
        progress.actions.extend(requests_going(s, obj, cluster))
        progress.obj = with_placement(obj, cluster, history)
        progress.cluster, progress.history, progress.placed_now = cluster, history, True
        return Continue()
