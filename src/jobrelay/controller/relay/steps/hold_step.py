"""Third step: what holds a workload back from its first placement. Pure.

Asked only of a workload that is not placed, not suspended (nothing runs anyway)
and has no mirror running (its lost placement is recovered instead, placing
step): its queue, what its pods need, the manager's admission of its pods
(steps/holds/, in that order).
"""

from __future__ import annotations

from jobrelay.controller.relay.snapshot import Snapshot
from jobrelay.controller.relay.steps.holds import BEFORE_PLACING, first_hold
from jobrelay.controller.relay.steps.step_types import Continue, HoldRule, Progress, StepAnswer


class HoldStep:
    name = "holds"

    def __init__(self, rules: tuple[HoldRule, ...] = BEFORE_PLACING) -> None:
        self.rules = rules

    def run(self, s: Snapshot, progress: Progress) -> StepAnswer:
        obj = progress.obj
        if progress.cluster or s.kind.is_suspended(obj) or progress.live:
            return Continue()
        hold = first_hold(self.rules, s, obj)
        if hold is None:
            return Continue()
        return progress.held(hold)
