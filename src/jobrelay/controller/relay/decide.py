"""The decision: what one management object and its mirrors need next. Pure.

``decide(snapshot) -> Plan``: no I/O, no clock (the time is in the snapshot),
no state. Every rule that keeps a workload's promise is in one of the steps
below (controller/relay/steps/), where a table test reaches it in microseconds:

- a workload is placed once, by a compare-and-swap of its placement
  annotation written *before* its mirror exists;
- it never has two live mirrors: a mirror is created only where it is placed,
  only when no live mirror of it exists anywhere (one that does is followed,
  wherever the annotation points), and only after a fresh read shows it
  unfinished (a lagging cache must not resurrect a finished one);
- a namesake on a worker that jobrelay did not create is never touched, and a
  mirror jobrelay did not create is never followed (mirror_standing.py);
- a workload restored from a backup (a new UID) neither runs again nor loses its
  running mirror until an admin adopts or stops that mirror (restore_step.py);
- the management status follows the mirror's and is never written when the
  kind's rules would refuse it.

The steps run in order, each adding actions to what the ones before found
(:class:`~jobrelay.controller.relay.steps.step_types.Progress`) and answering
``Continue()`` or ``Stop(plan)``; the first that stops decides.
"""

from __future__ import annotations

from jobrelay.controller.relay.plan import Plan
from jobrelay.controller.relay.snapshot import Snapshot
from jobrelay.controller.relay.steps.conflict_step import ConflictStep
from jobrelay.controller.relay.steps.deletion_step import DeletionStep
from jobrelay.controller.relay.steps.hold_step import HoldStep
from jobrelay.controller.relay.steps.mirror_record import with_mirror_record
from jobrelay.controller.relay.steps.mirror_step import MirrorStep
from jobrelay.controller.relay.steps.move_step import MoveStep
from jobrelay.controller.relay.steps.placing_step import PlacingStep
from jobrelay.controller.relay.steps.restore_step import RestoreStep
from jobrelay.controller.relay.steps.status_step import StatusStep
from jobrelay.controller.relay.steps.step_types import DecideStep, Progress, Stop

__all__ = ["STEPS", "decide"]

STEPS: tuple[DecideStep, ...] = (
    RestoreStep(),  # restored with a new UID while its mirror runs: held until an admin says
    DeletionStep(),  # gone or finished: its mirrors go; else those of earlier runs
    ConflictStep(),  # foreign mirrors, a mirror off its placement, an edited placement
    HoldStep(),  # not placed yet: its queue, what its pods need, the manager's admission
    PlacingStep(),  # not placed: where it goes (or why it waits)
    MoveStep(),  # placed: preempted, or its worker lost, drained, or its pods stuck
    MirrorStep(),  # its mirror there: adopted, created, or followed (and its spec)
    StatusStep(),  # its status follows its mirror's
)


def decide(s: Snapshot, steps: tuple[DecideStep, ...] = STEPS) -> Plan:
    """What ``s`` needs next: the plan of the first step that stops."""
    progress = Progress(obj=s.obj if s.obj is not None else {})
    for step in steps:
        answer = step.run(s, progress)
        if isinstance(answer, Stop):
            if progress.record is None:
                return answer.plan
            return with_mirror_record(answer.plan, *progress.record)
    raise AssertionError(f"no step ended the decision of {s.key}")  # the status step always does
