"""Held by its queue: fleet-wide queues (quota, fair share, priority) and its
namespace's ResourceQuota on the manager must admit a workload before its first
placement."""

from __future__ import annotations

from jobrelay.controller.relay.plan import Action, Annotate, RecordEvent, RequeueAfter
from jobrelay.controller.relay.snapshot import Snapshot
from jobrelay.controller.relay.steps.plan_parts import bounded, warning, without_details
from jobrelay.controller.relay.steps.step_types import Hold
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import NOT_PLACED_ANNOTATION

# What the memory keeps of a queued workload no admission pass has judged yet: held (so
# the passes see it), with nothing told.
QUEUE_UNJUDGED = "QueueUnjudged"


class HeldByQueue:
    """Held, unplaced, told once per reason (a Warning Event and the not-placed
    annotation; the numbers and its position change without a new one); the admission
    pass brings it back when it admits it, a RelayQueue's change when it waits on one.
    """

    name = "queue"

    def hold(self, s: Snapshot, obj: JsonObj) -> Hold | None:
        del obj  # the admission pass has judged it (the snapshot's queue_hold)
        hold = s.queue_hold
        if hold is None:
            return None
        if not hold.settled:
            # The next admission pass (within a second) judges it: no warning for a moment.
            return Hold((), RequeueAfter(1.0), held=s.held or QUEUE_UNJUDGED)
        signature = f"{hold.reason}|{without_details(hold.message)}"
        actions: list[Action] = []
        if signature != s.held:
            # The annotation first: whoever sees the Event should find the object saying it.
            said = bounded(f"{hold.reason}: {hold.message}")
            actions.append(Annotate({NOT_PLACED_ANNOTATION: said}))
            if hold.event_type == "Warning":
                actions.extend(warning(hold.reason, hold.message))
            else:
                actions.append(RecordEvent(hold.event_type, hold.reason, hold.message))
        return Hold(tuple(actions), RequeueAfter(s.settings.unplaceable_retry), held=signature)
