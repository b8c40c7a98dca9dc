"""Why a workload waits: hold rules, each one reason, asked in order like placement's
filters (placement/filters/). The first that holds ends the decision.

Which rules are asked depends on what the workload is about to do: be placed, have
its mirror created, or have new pods reach its mirror.
"""

from __future__ import annotations

from jobrelay.controller.relay.snapshot import Snapshot
from jobrelay.controller.relay.steps.holds.by_admission import HeldByAdmission
from jobrelay.controller.relay.steps.holds.by_dependencies import HeldByDependencies
from jobrelay.controller.relay.steps.holds.by_queue import QUEUE_UNJUDGED, HeldByQueue
from jobrelay.controller.relay.steps.step_types import Hold, HoldRule
from jobrelay.vocabulary.json_types import JsonObj

__all__ = [
    "BEFORE_CREATING",
    "BEFORE_NEW_PODS",
    "BEFORE_PLACING",
    "QUEUE_UNJUDGED",
    "HeldByAdmission",
    "HeldByDependencies",
    "HeldByQueue",
    "first_hold",
]

# Before a first placement: its queue admits it, what its pods need is there, and the
# manager's admission admits its pods.
BEFORE_PLACING: tuple[HoldRule, ...] = (HeldByQueue(), HeldByDependencies(), HeldByAdmission())
# Before any mirror is created (whoever set the placement: a user may preset or edit it;
# a preset is judged by its queue too, as an unplaced workload is).
BEFORE_CREATING: tuple[HoldRule, ...] = (HeldByQueue(), HeldByDependencies(), HeldByAdmission())
# Before a pod-template change reaches a mirror: new pods, judged like a first run's.
BEFORE_NEW_PODS: tuple[HoldRule, ...] = (HeldByAdmission(),)


def first_hold(rules: tuple[HoldRule, ...], s: Snapshot, obj: JsonObj) -> Hold | None:
    """The first of ``rules`` that holds ``obj`` now (None: none does)."""
    for rule in rules:
        hold = rule.hold(s, obj)
        if hold is not None:
            return hold
    return None
